//! Generated differential testing of rocketns against the Java NameServer: random request sequences
//! (generate.rs) run against both in lockstep (lockstep.rs, session.rs, servers.rs), every reply compared
//! under the normalizations COMPATIBILITY.md names (compare.rs), and a differing sequence shrunk to the
//! smallest that still differs (shrink.rs) and kept as a fixture (fixture.rs). The `rocketns-difftest`
//! binary drives it; tests/java/difftest.sh runs it in the test command. controller/ does the same for the
//! controller's codes, against Java's controller.

pub mod compare;
pub mod controller;
pub mod fixture;
pub mod generate;
pub mod lockstep;
pub mod model;
pub mod request;
pub mod servers;
pub mod session;
pub mod shrink;

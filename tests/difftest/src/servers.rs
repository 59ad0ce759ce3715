//! Fresh NameServers for each sequence: a Java NameServer (a JVM of its own, started one ahead so that its
//! start-up overlaps the previous sequence) and rocketns in this process. Both scan for silent brokers
//! every 200 ms, so that an expiry takes well under a second. For controller sequences each also runs a
//! controller group of one node (`enableControllerInNamesrv`, the same keys for both).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rocketns::testing::server::InProcessServer;
use rocketns::{NameServer, NamesrvConfig};

/// `scanNotActiveBrokerInterval` of both servers, in milliseconds.
pub const SCAN_INTERVAL_MS: u64 = 200;

/// Warnings and errors to the NameServer's own log file.
const LOGBACK_4X: &str = r#"<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{30} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="OUT"/></root>
</configuration>
"#;

/// The keys of a one-node controller group on `port`, its store under `dir`. No scan for inactive masters
/// within a sequence (its timing is each server's own): only the steps' requests decide.
pub fn controller_keys(port: u16, dir: &Path) -> String {
    format!(
        "enableControllerInNamesrv=true\ncontrollerDLegerGroup=difftest\ncontrollerDLegerPeers=n0-127.0.0.1:{port}\n\
         controllerDLegerSelfId=n0\ncontrollerStorePath={}\nscanInactiveMasterInterval=3600000\n",
        dir.join("controller").display()
    )
}

/// A Java NameServer process; killed when dropped.
pub struct JavaNamesrv {
    child: Child,
    pub addr: SocketAddr,
    /// Its controller's port, when started with one.
    pub controller: Option<SocketAddr>,
    _dir: tempfile::TempDir,
}

impl Drop for JavaNamesrv {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Java NameServers from a folder of jars (tests/java/fetch.sh), each on a port of its own.
pub struct JavaLauncher {
    jars: PathBuf,
    next_port: u16,
    spare: Option<JavaNamesrv>,
    controller: bool,
}

fn free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

impl JavaLauncher {
    pub fn new(jars: &Path) -> JavaLauncher {
        JavaLauncher { jars: jars.to_path_buf(), next_port: 20000, spare: None, controller: false }
    }

    /// NameServers that also run a one-node controller group (`controller_keys`).
    pub fn with_controller(jars: &Path) -> JavaLauncher {
        JavaLauncher { controller: true, ..JavaLauncher::new(jars) }
    }

    fn port(&mut self) -> u16 {
        while !free(self.next_port) {
            self.next_port += 1;
        }
        let port = self.next_port;
        self.next_port = if self.next_port > 60000 { 20000 } else { self.next_port + 1 };
        port
    }

    fn spawn(&mut self) -> std::io::Result<JavaNamesrv> {
        let port = self.port();
        let controller = self.controller.then(|| self.port());
        let dir = tempfile::tempdir()?;
        let conf = dir.path().join("namesrv.properties");
        std::fs::write(
            &conf,
            format!(
                "listenPort={port}\nscanNotActiveBrokerInterval={SCAN_INTERVAL_MS}\nkvConfigPath={}\nconfigStorePath={}\n{}",
                dir.path().join("kvConfig.json").display(),
                dir.path().join("namesrv.properties").display(),
                controller.map(|c| controller_keys(c, dir.path())).unwrap_or_default()
            ),
        )?;
        // A 4.x NameServer reads its logging setup from $ROCKETMQ_HOME/conf (5.x ones carry theirs).
        std::fs::create_dir_all(dir.path().join("conf"))?;
        std::fs::write(dir.path().join("conf/logback_namesrv.xml"), LOGBACK_4X)?;
        let log = std::fs::File::create(dir.path().join("namesrv.log"))?;
        let child = Command::new("java")
            .args(["-Xms128m", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData"])
            .arg(format!("-Duser.home={}", dir.path().display()))
            .arg("-cp")
            .arg(format!("{}/*", self.jars.display()))
            .arg("org.apache.rocketmq.namesrv.NamesrvStartup")
            .arg("-c")
            .arg(&conf)
            .env("ROCKETMQ_HOME", dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let at = |port| SocketAddr::from(([127, 0, 0, 1], port));
        Ok(JavaNamesrv { child, addr: at(port), controller: controller.map(at), _dir: dir })
    }

    /// A started Java NameServer that listens, and the next one starting.
    pub fn take(&mut self) -> std::io::Result<JavaNamesrv> {
        let mut java = match self.spare.take() {
            Some(j) => j,
            None => self.spawn()?,
        };
        self.spare = Some(self.spawn()?);
        let started = Instant::now();
        while std::net::TcpStream::connect(java.controller.unwrap_or(java.addr)).is_err() {
            if let Ok(Some(status)) = java.child.try_wait() {
                let log = std::fs::read_to_string(java._dir.path().join("namesrv.log")).unwrap_or_default();
                return Err(std::io::Error::other(format!("the Java NameServer exited ({status}):\n{log}")));
            }
            if started.elapsed() > Duration::from_secs(90) {
                return Err(std::io::Error::other("the Java NameServer did not listen within 90 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(java)
    }
}

/// rocketns in this process, on 127.0.0.1 port 0 with its own KV file; stopped when dropped.
pub struct Rocketns {
    pub addr: SocketAddr,
    /// Its controller's port, when started with one.
    pub controller: Option<SocketAddr>,
    _server: InProcessServer,
    _dir: tempfile::TempDir,
}

impl Rocketns {
    /// Must be called inside a tokio runtime.
    pub async fn start() -> std::io::Result<Rocketns> {
        Rocketns::start_with("").await
    }

    /// With more settings, as properties text (for the runner's own tests: a server that differs).
    pub async fn start_with(properties: &str) -> std::io::Result<Rocketns> {
        Rocketns::start_in(tempfile::tempdir()?, properties, None).await
    }

    /// With a one-node controller group (`controller_keys`).
    pub async fn start_controller() -> std::io::Result<Rocketns> {
        let dir = tempfile::tempdir()?;
        let port = rocketns::testing::wire::free_port();
        let keys = controller_keys(port, dir.path());
        Rocketns::start_in(dir, &keys, Some(SocketAddr::from(([127, 0, 0, 1], port)))).await
    }

    async fn start_in(
        dir: tempfile::TempDir,
        properties: &str,
        controller: Option<SocketAddr>,
    ) -> std::io::Result<Rocketns> {
        let mut config = NamesrvConfig {
            bind_address: "127.0.0.1".into(),
            listen_port: 0,
            kv_config_path: dir.path().join("kvConfig.json").display().to_string(),
            ..NamesrvConfig::default()
        };
        config
            .apply_properties(format!("scanNotActiveBrokerInterval={SCAN_INTERVAL_MS}\n{properties}"), "difftest")
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let server = NameServer::bind(config, None).await.map_err(|e| std::io::Error::other(e.to_string()))?;
        let server = InProcessServer::run(server)?;
        Ok(Rocketns { addr: server.addr, controller, _server: server, _dir: dir })
    }
}

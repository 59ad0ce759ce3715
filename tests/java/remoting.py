"""The RocketMQ remoting protocol as the Java stages' Python helpers speak it (min_broker_id.py,
requests.py, routes_gone.py): JSON-header frames, and a broker's connection to a NameServer as RocketMQ 5.x brokers
register over it."""
import json
import socket
import struct


def frame(header, body=b""):
    h = json.dumps(header).encode()
    return struct.pack(">II", 4 + len(h) + len(body), len(h)) + h + body


def read_frame(sock, buf):
    """The next frame's (header, body) from SOCK, BUF holding what was read past the last one; None at EOF."""
    while True:
        if len(buf) >= 4:
            (length,) = struct.unpack(">I", buf[:4])
            if len(buf) >= 4 + length:
                data = bytes(buf[4:4 + length])
                del buf[:4 + length]
                header_len = struct.unpack(">I", data[:4])[0] & 0xFFFFFF
                return json.loads(data[4:4 + header_len]), data[4 + header_len:]
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk


class Connection:
    """A client connection to ADDR (`host:port`); requests one at a time, each given TIMEOUT seconds."""

    def __init__(self, addr, version=453, timeout=30):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.buf, self.opaque, self.version = bytearray(), 0, version

    def request(self, code, fields, body=b""):
        """The reply's (header, body)."""
        self.opaque += 1
        header = {"code": code, "language": "JAVA", "version": self.version, "opaque": self.opaque, "flag": 0,
                  "extFields": fields}
        self.sock.sendall(frame(header, body))
        reply = read_frame(self.sock, self.buf)
        if reply is None:
            raise ConnectionError("the server closed the connection")
        return reply

    def close(self):
        self.sock.close()


class Broker:
    """A broker of cluster DefaultCluster registering with NAMESRV over a connection of its own (its close
    unregisters the broker). A request that fails stops the program, unless `check` is off."""

    check = True

    def __init__(self, namesrv, name, broker_id, addr, acting_master, heartbeat_ms=None):
        self.namesrv, self.name, self.id, self.addr = namesrv, name, broker_id, addr
        self.acting_master, self.heartbeat_ms = acting_master, heartbeat_ms
        self.conn = None

    def request(self, code, fields, body=b""):
        if self.conn is None:
            self.conn = Connection(self.namesrv)
        header, _ = self.conn.request(code, fields, body)
        if self.check and header["code"] != 0:
            raise SystemExit(f"{self.addr}: request {code} failed: {header}")
        return header

    def register(self, topics=()):
        table = {t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicFilterType":
                     "SINGLE_TAG", "topicSysFlag": 0, "order": False} for t in topics}
        body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": table, "dataVersion": {
            "counter": 1, "stateVersion": 0, "timestamp": 1700000000000}}, "filterServerList": []}).encode()
        fields = {"brokerName": self.name, "brokerAddr": self.addr, "clusterName": "DefaultCluster",
                  "haServerAddr": self.addr.replace(":", ":1"), "brokerId": str(self.id),
                  "enableActingMaster": str(self.acting_master).lower(), "compressed": "false", "bodyCrc32": "0"}
        if self.heartbeat_ms:
            fields["heartbeatTimeoutMillis"] = str(self.heartbeat_ms)
        return self.request(103, fields, body)

    def unregister(self):
        self.request(104, {"brokerName": self.name, "brokerAddr": self.addr, "clusterName": "DefaultCluster",
                           "brokerId": str(self.id)})

    def close(self):
        self.conn.close()
        self.conn = None

// The client side of tests/java/controller.sh, built against the Java 5.3.3 client's jars: a producer that
// keeps sending through a broker group while its master is killed, and a consumer that checks that every
// message the producer saw acknowledged can be read back.
//   java -cp 'JARS/*:OUT' Failover produce NAMESRV TOPIC ACKED_FILE STOP_FILE
//     sends message 0, 1, 2, ... one at a time until STOP_FILE exists; each SEND_OK appends its number to
//     ACKED_FILE at once (a failed send is logged and the next number goes on); prints how many were acked
//     and how many failed, then PASS.
//   java -cp 'JARS/*:OUT' Failover consume NAMESRV TOPIC ACKED_FILE
//     reads TOPIC from its first offset with a new group until every number in ACKED_FILE has been seen (at
//     most 120 s); prints PASS, or FAIL with how many acknowledged messages are missing.
import java.io.FileWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class Failover {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("produce")) {
            produce(args[1], args[2], Path.of(args[3]), Path.of(args[4]));
        } else {
            consume(args[1], args[2], Path.of(args[3]));
        }
        System.out.println("PASS");
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    static void produce(String namesrv, String topic, Path acked, Path stop) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("failover-producer");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(3_000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        int ok = 0, failed = 0;
        try (FileWriter out = new FileWriter(acked.toFile(), StandardCharsets.UTF_8, true)) {
            for (int i = 0; !Files.exists(stop); i++) {
                try {
                    SendResult result = producer.send(new Message(topic, "f", Integer.toString(i).getBytes(StandardCharsets.UTF_8)));
                    if (result.getSendStatus() == SendStatus.SEND_OK) {
                        out.write(i + "\n");
                        out.flush();
                        ok++;
                    } else {
                        failed++;
                    }
                } catch (Exception e) {
                    failed++;
                    if (failed % 20 == 1) {
                        System.out.println("send " + i + " failed: " + e.getMessage().split("\n")[0]);
                    }
                    Thread.sleep(100);
                }
                Thread.sleep(10);
            }
        }
        System.out.println("acked " + ok + ", failed " + failed);
    }

    static void consume(String namesrv, String topic, Path acked) throws Exception {
        Set<String> expected = new HashSet<>(Files.readAllLines(acked, StandardCharsets.UTF_8));
        expected.remove("");
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer("failover-check-" + System.nanoTime());
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.start();
        Set<String> seen = new HashSet<>();
        long deadline = System.currentTimeMillis() + 120_000;
        while (!seen.containsAll(expected) && System.currentTimeMillis() < deadline) {
            List<MessageExt> messages = consumer.poll(1_000);
            for (MessageExt m : messages) {
                seen.add(new String(m.getBody(), StandardCharsets.UTF_8));
            }
        }
        Set<String> missing = new HashSet<>(expected);
        missing.removeAll(seen);
        System.out.println("acknowledged " + expected.size() + ", read " + seen.size() + ", missing " + missing.size());
        if (!missing.isEmpty() || expected.isEmpty()) {
            System.out.println("FAIL: " + (expected.isEmpty() ? "nothing was acknowledged" : "missing " + missing));
            System.out.flush();
            Runtime.getRuntime().halt(1);
        }
    }
}

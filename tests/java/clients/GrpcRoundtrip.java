import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * The gRPC Java client (rocketmq-client-java) through a RocketMQ Proxy: sends COUNT messages whose bodies are
 * their numbers, and receives them back with a SimpleConsumer of a new group, until every message sent has come
 * back (2 minutes at most). Prints what it did, then PASS, or FAIL and why.
 *
 *   GrpcRoundtrip ENDPOINT TOPIC COUNT GROUP [FLAG_DIR]
 *
 * With FLAG_DIR (the failover run), the consumer receives while the producer sends; after a third of the
 * messages the producer creates FLAG_DIR/stop and waits for FLAG_DIR/stopped (the script stops a broker
 * meanwhile), sends the rest, creates FLAG_DIR/sent (the script starts the broker again), and every message
 * whose send succeeded must come back, at least once; duplicates are counted.
 */
public class GrpcRoundtrip {
    public static void main(String[] args) throws Exception {
        String endpoint = args[0], topic = args[1], group = args[3];
        int count = Integer.parseInt(args[2]);
        Path flags = args.length > 4 ? Path.of(args[4]) : null;
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(10)).build();
        Set<Integer> sent = ConcurrentHashMap.newKeySet();
        Set<Integer> received = ConcurrentHashMap.newKeySet();
        AtomicInteger duplicates = new AtomicInteger(), sendFailures = new AtomicInteger();
        SimpleConsumer consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL)).build();
        Thread receiver = new Thread(() -> {
            long deadline = System.nanoTime() + Duration.ofMinutes(3).toNanos();
            int failures = 0;
            while (System.nanoTime() < deadline) {
                try {
                    List<MessageView> views = consumer.receive(32, Duration.ofSeconds(30));
                    for (MessageView view : views) {
                        int n = Integer.parseInt(StandardCharsets.UTF_8.decode(view.getBody()).toString());
                        if (!received.add(n)) duplicates.incrementAndGet();
                        consumer.ack(view);
                    }
                } catch (Exception e) {
                    if (Thread.currentThread().isInterrupted()) return;
                    // The Proxy's first receive may fail while the client's settings reach it, and receives
                    // from a stopped broker fail until the routes lose it.
                    if (++failures <= 5) System.out.println("receive failed (" + failures + "): " + e);
                }
                if (Thread.currentThread().isInterrupted()) return;
            }
        });
        receiver.start();
        try (Producer producer = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build()) {
            for (int i = 0; i < count; i++) {
                if (flags != null && i == count / 3) {
                    Files.createFile(flags.resolve("stop"));
                    while (!Files.exists(flags.resolve("stopped"))) Thread.sleep(100);
                    System.out.println("sent " + i + ", then a broker was stopped");
                }
                byte[] body = Integer.toString(i).getBytes(StandardCharsets.UTF_8);
                try {
                    producer.send(provider.newMessageBuilder().setTopic(topic).setBody(body).build());
                    sent.add(i);
                } catch (Exception e) {
                    if (sendFailures.incrementAndGet() <= 5) System.out.println("send " + i + " failed: " + e);
                }
                if (flags != null) Thread.sleep(5);
            }
        }
        System.out.println("sent " + sent.size() + " of " + count + ", " + sendFailures.get() + " sends failed");
        if (flags != null) Files.createFile(flags.resolve("sent"));

        long deadline = System.nanoTime() + Duration.ofMinutes(2).toNanos();
        while (!received.containsAll(sent) && System.nanoTime() < deadline) Thread.sleep(200);
        receiver.interrupt();
        Set<Integer> missing = new java.util.TreeSet<>(sent);
        missing.removeAll(received);
        System.out.println("received " + received.size() + " distinct, " + duplicates.get() + " duplicates, "
            + missing.size() + " sent but not received");
        if (sent.size() != count && flags == null) {
            System.out.println("FAIL: not every send succeeded");
        } else if (!missing.isEmpty()) {
            System.out.println("FAIL: missing " + missing.stream().limit(10).toList());
        } else {
            System.out.println("PASS");
        }
        consumer.close();
        System.exit(0);
    }
}

// The client side of tests/java/migration.sh, built against the Java 5.3.3 client's jars: applications that
// keep running, and applications that deploy, while the NameServers behind them are replaced one at a time.
//   java -cp 'JARS/*:OUT' Migration NAMESRV TOPICS DIR CLEAN_STEPS
// NAMESRV is the clients' `a;b` list, TOPICS the topics (comma-separated), DIR a folder the script and this
// program share: DIR/step holds the name of the step the script is in (each send counts for the step it
// started in), DIR/closed exists while the script has a NameServer's port closed (from just before it kills
// the old node until the new one listens), DIR/stop ends the traffic. CLEAN_STEPS: the steps (comma-separated, `-` for none) in which no
// send may fail.
// Runs, until DIR/stop appears:
//   - a steady producer (its own client instance, `steady`): 20 sync sends a second, round robin over TOPICS;
//   - a push consumer group consuming every topic from its first offset;
//   - every second a NEW producer (instanceName new-N: its own client instance, route cache and random
//     NameServer choice) that starts, sends one message, notes the NameServer its client ended with, and
//     shuts down: an application deploying meanwhile.
// Every message has a unique key. It prints a line a second (`T time step ...`: what happened in that
// second), then, after the stop, waits up to 30 s for the consumer to see every message sent OK, and prints
// a `STEP` line per step (sends OK, failed, failed with "No route info", failed with a refused connection
// (RemotingConnectException in the cause chain) that started while DIR/closed existed, lost: sent OK and
// never consumed; the new producers and the NameServer each ended with), the distinct failures (`FAILURE`
// lines), and `PASS:`/`FAIL:` lines: no message lost; in each clean step no failed send at all, not even one
// refused while the port was closed (a 5.3.3 client's send fails when its first NameServer call finds the
// port closed, whatever the NameServer: MQClientInstance.updateTopicRouteInfoFromNameServer rethrows the
// RemotingConnectException as an IllegalStateException; its next call goes to the next NameServer). It
// exits 0 after printing them (the verdicts are in the lines), without running the client library's
// shutdown hooks.
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.exception.RemotingConnectException;

public class Migration {
    /** One step's tally. */
    static class Tally {
        final AtomicLong ok = new AtomicLong(), failed = new AtomicLong(), noRoute = new AtomicLong();
        /** Failed with a refused connection, having started while the script had a port closed. */
        final AtomicLong refusedClosed = new AtomicLong();
        final AtomicLong newOk = new AtomicLong(), newFailed = new AtomicLong();
        /** The NameServer each new producer's client ended with, and how many. */
        final Map<String, AtomicLong> chose = new ConcurrentHashMap<>();
        /** Each distinct failure (class: message) and how many times. */
        final Map<String, AtomicLong> failures = new ConcurrentHashMap<>();
    }

    static final Map<String, Tally> tallies = java.util.Collections.synchronizedMap(new LinkedHashMap<>());
    /** The keys of the messages sent OK, each with the step its send started in. */
    static final Map<String, String> sentOk = new ConcurrentHashMap<>();
    static final Set<String> consumed = ConcurrentHashMap.newKeySet();
    static final AtomicReference<String> step = new AtomicReference<>("start");
    static volatile boolean stopping;
    static Path closedFile;

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        List<String> topics = Arrays.asList(args[1].split(","));
        Path dir = Path.of(args[2]);
        List<String> clean = args[3].equals("-") ? List.of() : Arrays.asList(args[3].split(","));
        Path stepFile = dir.resolve("step"), stopFile = dir.resolve("stop");
        closedFile = dir.resolve("closed");
        readStep(stepFile);

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("mig-consumer");
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("consumer");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        for (String topic : topics) {
            consumer.subscribe(topic, "*");
        }
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt message : messages) {
                consumed.add(message.getKeys());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        DefaultMQProducer steady = new DefaultMQProducer("mig-steady");
        steady.setNamesrvAddr(namesrv);
        steady.setInstanceName("steady");
        steady.start();

        Thread steadyThread = new Thread(() -> {
            long n = 0, next = System.nanoTime();
            while (!stopping) {
                String topic = topics.get((int) (n % topics.size()));
                send(steady, topic, "s-" + n++, false);
                next += 50_000_000L;
                long wait = next - System.nanoTime();
                if (wait > 0) {
                    sleep(wait / 1_000_000L);
                } else {
                    next = System.nanoTime();
                }
            }
        }, "steady");
        steadyThread.start();

        // Several threads: a deploying producer that waits on a timeout does not hold the next one back.
        ScheduledExecutorService deploys = Executors.newScheduledThreadPool(4);
        AtomicLong deployed = new AtomicLong();
        deploys.scheduleAtFixedRate(() -> deploy(namesrv, topics, deployed.getAndIncrement()), 0, 1, TimeUnit.SECONDS);

        DateTimeFormatter clock = DateTimeFormatter.ofPattern("HH:mm:ss");
        long[] last = new long[6];
        boolean ready = false;
        while (!Files.exists(stopFile)) {
            for (int i = 0; i < 10; i++) {
                sleep(100);
                readStep(stepFile);
            }
            long[] now = totals();
            if (!ready && now[0] > 0) {
                System.out.println("READY");
                ready = true;
            }
            System.out.printf("T %s step=%s ok=%d failed=%d noroute=%d refused_closed=%d new_ok=%d new_failed=%d "
                + "consumed=%d%n", LocalTime.now().format(clock), step.get(), now[0] - last[0], now[1] - last[1],
                now[2] - last[2], now[5] - last[5], now[3] - last[3], now[4] - last[4], consumed.size());
            System.out.flush();
            last = now;
        }

        stopping = true;
        deploys.shutdown();
        deploys.awaitTermination(20, TimeUnit.SECONDS);
        steadyThread.join(20_000);
        long drainUntil = System.currentTimeMillis() + 30_000;
        while (!consumed.containsAll(sentOk.keySet()) && System.currentTimeMillis() < drainUntil) {
            sleep(200);
        }

        long lostAll = 0;
        synchronized (tallies) {
            for (Map.Entry<String, Tally> entry : tallies.entrySet()) {
                String name = entry.getKey();
                Tally t = entry.getValue();
                long lost = sentOk.entrySet().stream()
                    .filter(e -> e.getValue().equals(name) && !consumed.contains(e.getKey())).count();
                lostAll += lost;
                System.out.printf("STEP %s ok=%d failed=%d noroute=%d refused_closed=%d lost=%d new_ok=%d "
                    + "new_failed=%d chose=%s%n", name, t.ok.get(), t.failed.get(), t.noRoute.get(),
                    t.refusedClosed.get(), lost, t.newOk.get(), t.newFailed.get(), new java.util.TreeMap<>(t.chose));
                t.failures.forEach((what, count) -> System.out.printf("FAILURE %s %d x %s%n", name, count.get(), what));
            }
        }
        System.out.printf("%s: no lost message (%d sent OK, %d of them never consumed after the drain)%n",
            lostAll == 0 ? "PASS" : "FAIL", sentOk.size(), lostAll);
        for (String name : clean) {
            Tally t = tallies.get(name);
            long failed = t == null ? -1 : t.failed.get(), refused = t == null ? 0 : t.refusedClosed.get();
            System.out.printf("%s: no failed send in step %s (%d failed, %d of them refused while the port was "
                + "closed)%n", failed == 0 ? "PASS" : "FAIL", name, failed, refused);
        }
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    /** One application deploying: a producer of its own client instance sends one message and stops. */
    static void deploy(String namesrv, List<String> topics, long n) {
        if (stopping) {
            return;
        }
        DefaultMQProducer producer = new DefaultMQProducer("mig-new");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("new-" + n);
        Tally tally = tally(step.get());
        try {
            producer.start();
        } catch (Exception e) {
            failed(tally, e, true, false);
            return;
        }
        try {
            send(producer, topics.get((int) (n % topics.size())), "n-" + n, true);
            tally.chose.computeIfAbsent(chosen(producer), k -> new AtomicLong()).incrementAndGet();
        } finally {
            producer.shutdown();
        }
    }

    /** One sync send of a message with KEY, counted for the step it started in. */
    static void send(DefaultMQProducer producer, String topic, String key, boolean deploying) {
        String at = step.get();
        Tally tally = tally(at);
        boolean closed = Files.exists(closedFile);
        Message message = new Message(topic, "mig", key, key.getBytes(StandardCharsets.UTF_8));
        try {
            SendResult result = producer.send(message);
            if (result.getSendStatus() != SendStatus.SEND_OK) {
                failed(tally, new IllegalStateException("send status " + result.getSendStatus()), deploying, false);
                return;
            }
            sentOk.put(key, at);
            tally.ok.incrementAndGet();
            if (deploying) {
                tally.newOk.incrementAndGet();
            }
        } catch (Exception e) {
            failed(tally, e, deploying, closed);
        }
    }

    static void failed(Tally tally, Exception e, boolean deploying, boolean closed) {
        tally.failed.incrementAndGet();
        if (closed && refused(e)) {
            tally.refusedClosed.incrementAndGet();
        }
        if (deploying) {
            tally.newFailed.incrementAndGet();
        }
        String message = String.valueOf(e.getMessage());
        if (message.contains("No route info")) {
            tally.noRoute.incrementAndGet();
        }
        // The FAQ link and what follows it (the same for every failure) are left out.
        int faq = message.indexOf("\nSee ");
        if (faq >= 0) {
            message = message.substring(0, faq);
        }
        message = message.replaceAll("\\s+", " ").trim();
        if (message.length() > 200) {
            message = message.substring(0, 200) + "...";
        }
        tally.failures.computeIfAbsent(e.getClass().getName() + ": " + message, k -> new AtomicLong())
            .incrementAndGet();
    }

    /** Whether a RemotingConnectException is in e's cause chain. */
    static boolean refused(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof RemotingConnectException) {
                return true;
            }
        }
        return false;
    }

    /** The NameServer address the producer's client instance has chosen (NettyRemotingClient's own field). */
    static String chosen(DefaultMQProducer producer) {
        try {
            Object client = producer.getDefaultMQProducerImpl().getmQClientFactory().getMQClientAPIImpl()
                .getRemotingClient();
            Field field = client.getClass().getDeclaredField("namesrvAddrChoosed");
            field.setAccessible(true);
            return String.valueOf(((AtomicReference<?>) field.get(client)).get());
        } catch (Exception e) {
            return "unknown";
        }
    }

    static Tally tally(String name) {
        synchronized (tallies) {
            return tallies.computeIfAbsent(name, k -> new Tally());
        }
    }

    /** Sends OK, failed, "No route info", and of the new producers OK and failed, over all steps. */
    static long[] totals() {
        long[] sum = new long[6];
        synchronized (tallies) {
            for (Tally t : tallies.values()) {
                sum[0] += t.ok.get();
                sum[1] += t.failed.get();
                sum[2] += t.noRoute.get();
                sum[3] += t.newOk.get();
                sum[4] += t.newFailed.get();
                sum[5] += t.refusedClosed.get();
            }
        }
        return sum;
    }

    static void readStep(Path file) {
        try {
            String name = Files.readString(file).trim();
            if (!name.isEmpty()) {
                step.set(name);
            }
        } catch (Exception e) {
            // Not written yet, or being written: the step stays.
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}

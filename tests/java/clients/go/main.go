// The Go RocketMQ client (github.com/apache/rocketmq-client-go/v2) against one NameServer, for
// tests/java/clients.sh. Exits non-zero, saying why, unless every check holds.
//
//	goclient roundtrip NAMESRV TOPIC COUNT: TOPIC has no route yet; the producer sends COUNT messages through
//	    TBW102 (the broker creates the topic), all SEND_OK; the NameServer then routes TOPIC; a push consumer
//	    of a new group, from the first offset, receives exactly the COUNT bodies sent.
//	goclient ordered NAMESRV TOPIC ORDERCONF: the route of TOPIC carries ORDERCONF ("broker:queues;...") as
//	    orderTopicConf, so the client's queue list for TOPIC is the one it describes.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func fail(format string, args ...interface{}) {
	fmt.Printf("FAIL: "+format+"\n", args...)
	os.Exit(1)
}

// publishQueues asks the NameServer afresh (a new admin client has no cached route) for topic's queues.
func publishQueues(resolver primitive.NsResolver, topic string) ([]*primitive.MessageQueue, error) {
	a, err := admin.NewAdmin(admin.WithResolver(resolver))
	if err != nil {
		fail("admin client: %v", err)
	}
	defer a.Close()
	return a.FetchPublishMessageQueues(context.Background(), topic)
}

func roundtrip(resolver primitive.NsResolver, topic string, count int) {
	if _, err := publishQueues(resolver, topic); err == nil {
		fail("%s exists before the first message: nothing would go through TBW102", topic)
	}
	run := fmt.Sprintf("%s-%d", topic, time.Now().UnixNano())
	p, err := producer.NewDefaultProducer(producer.WithNsResolver(resolver),
		producer.WithGroupName("go-producer-"+run), producer.WithRetry(2),
		producer.WithSendMsgTimeout(10*time.Second))
	if err != nil {
		fail("producer: %v", err)
	}
	if err := p.Start(); err != nil {
		fail("producer start: %v", err)
	}
	sent := make(map[string]bool, count)
	for i := 0; i < count; i++ {
		body := fmt.Sprintf("%s#%d", run, i)
		result, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
		if err != nil {
			fail("message %d: %v", i, err)
		}
		if result.Status != primitive.SendOK {
			fail("message %d: status %d", i, result.Status)
		}
		sent[body] = true
	}
	fmt.Printf("sent %d of %d to %s (created through TBW102)\n", len(sent), count, topic)

	var queues []*primitive.MessageQueue
	for i := 0; i < 100 && len(queues) == 0; i++ {
		queues, _ = publishQueues(resolver, topic)
		if len(queues) == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if len(queues) == 0 {
		fail("the NameServer never routed %s after the broker created it", topic)
	}
	fmt.Printf("routed by the NameServer: %s, %d queues\n", topic, len(queues))

	c, err := consumer.NewPushConsumer(consumer.WithNsResolver(resolver),
		consumer.WithGroupName("go-consumer-"+run),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		fail("consumer: %v", err)
	}
	var mu sync.Mutex
	received := make(map[string]bool, count)
	unknown, redelivered := "", 0
	done := make(chan struct{})
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context,
		msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			body := string(m.Body)
			switch {
			case !sent[body]:
				unknown = body
			case received[body]:
				redelivered++
			default:
				received[body] = true
				if len(received) == count {
					close(done)
				}
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		fail("subscribe: %v", err)
	}
	if err := c.Start(); err != nil {
		fail("consumer start: %v", err)
	}
	select {
	case <-done:
	case <-time.After(90 * time.Second):
	}
	_ = c.Shutdown()
	_ = p.Shutdown()
	mu.Lock()
	defer mu.Unlock()
	fmt.Printf("consumed %d of %d (%d redelivered)\n", len(received), count, redelivered)
	if unknown != "" {
		fail("consumed a message that was not sent: %s", unknown)
	}
	if len(received) != count {
		fail("consumed %d of %d within 90 s", len(received), count)
	}
}

func ordered(resolver primitive.NsResolver, topic, orderConf string) {
	expected := map[string]int{}
	for _, entry := range strings.Split(orderConf, ";") {
		parts := strings.Split(entry, ":")
		n, _ := strconv.Atoi(parts[1])
		expected[parts[0]] += n
	}
	queues, err := publishQueues(resolver, topic)
	if err != nil {
		fail("route of %s: %v", topic, err)
	}
	got := map[string]int{}
	for _, q := range queues {
		got[q.BrokerName]++
	}
	if fmt.Sprint(got) != fmt.Sprint(expected) {
		fail("queues of the ordered %s per broker: %v, expected %v from %s", topic, got, expected, orderConf)
	}
	fmt.Printf("orderTopicConf %s read by the client: %d ordered queues\n", orderConf, len(queues))
}

func main() {
	if len(os.Args) != 5 {
		fail("usage: goclient roundtrip NAMESRV TOPIC COUNT | goclient ordered NAMESRV TOPIC ORDERCONF")
	}
	rlog.SetLogLevel("warn")
	resolver := primitive.NewPassthroughResolver(strings.Split(os.Args[2], ";"))
	switch os.Args[1] {
	case "roundtrip":
		count, err := strconv.Atoi(os.Args[4])
		if err != nil {
			fail("COUNT: %v", err)
		}
		roundtrip(resolver, os.Args[3], count)
	case "ordered":
		ordered(resolver, os.Args[3], os.Args[4])
	default:
		fail("unknown mode %s", os.Args[1])
	}
	fmt.Println("PASS")
}

import apache.rocketmq.v2.Address;
import apache.rocketmq.v2.AddressScheme;
import apache.rocketmq.v2.Endpoints;
import apache.rocketmq.v2.MessagingServiceGrpc;
import apache.rocketmq.v2.QueryRouteRequest;
import apache.rocketmq.v2.QueryRouteResponse;
import apache.rocketmq.v2.Resource;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.stub.MetadataUtils;
import java.util.concurrent.TimeUnit;

/**
 * QueryRoute as a gRPC client sends it to a Proxy (what rocketmq-client-java asks before it sends to a
 * topic), printed in protobuf's text format: the routes the Proxy found through its NameServer.
 *
 *   QueryRoute HOST PORT TOPIC
 */
public class QueryRoute {
    public static void main(String[] args) throws Exception {
        String host = args[0], topic = args[2];
        int port = Integer.parseInt(args[1]);
        ManagedChannel channel = ManagedChannelBuilder.forAddress(host, port).usePlaintext().build();
        Metadata headers = new Metadata();
        headers.put(Metadata.Key.of("x-mq-language", Metadata.ASCII_STRING_MARSHALLER), "JAVA");
        headers.put(Metadata.Key.of("x-mq-protocol", Metadata.ASCII_STRING_MARSHALLER), "v2");
        headers.put(Metadata.Key.of("x-mq-client-version", Metadata.ASCII_STRING_MARSHALLER), "5.0.7");
        headers.put(Metadata.Key.of("x-mq-client-id", Metadata.ASCII_STRING_MARSHALLER), "rocketns-query-route");
        headers.put(Metadata.Key.of("x-mq-request-id", Metadata.ASCII_STRING_MARSHALLER), "1");
        QueryRouteRequest request = QueryRouteRequest.newBuilder()
            .setTopic(Resource.newBuilder().setName(topic))
            .setEndpoints(Endpoints.newBuilder().setScheme(AddressScheme.IPv4)
                .addAddresses(Address.newBuilder().setHost(host).setPort(port)))
            .build();
        QueryRouteResponse response = MessagingServiceGrpc.newBlockingStub(channel)
            .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers))
            .withDeadlineAfter(10, TimeUnit.SECONDS).queryRoute(request);
        System.out.print(response);
        channel.shutdownNow();
    }
}

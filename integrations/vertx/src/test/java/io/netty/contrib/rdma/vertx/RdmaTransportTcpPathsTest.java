package io.netty.contrib.rdma.vertx;

import io.netty.contrib.channel.rdma.RdmaChannel;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClientAgent;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.RequestOptions;
import io.vertx.core.net.impl.ConnectionBase;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.List;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Vert.x HTTP over an {@link RdmaChannel}'s TCP path: a server on {@link RdmaTransport#withTcpListen(boolean)}
 * answers an RDMA client and a client of Vert.x's own transport on one port, and a client on
 * {@link RdmaTransport#withTcpFallback(boolean)} reaches a server of Vert.x's own transport. Bodies checked by CRC.
 */
@Timeout(120)
class RdmaTransportTcpPathsTest {

    private static <T> T await(Future<T> future) throws Exception {
        return future.toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }

    private static long crc(byte[] bytes) {
        CRC32 crc = new CRC32();
        crc.update(bytes);
        return crc.getValue();
    }

    private static Vertx rdma(RdmaTransport transport) {
        return Vertx.builder().with(new VertxOptions().setEventLoopPoolSize(2))
                .withTransport(transport.asTransport()).build();
    }

    private static HttpServer echoServer(Vertx vertx, List<RdmaChannel> accepted) throws Exception {
        return await(vertx.createHttpServer()
                .connectionHandler(conn -> {
                    if (((ConnectionBase) conn).channel() instanceof RdmaChannel ch) {
                        accepted.add(ch);
                    }
                })
                .requestHandler(req -> req.body().onSuccess(body -> req.response().end(body)))
                .listen(0, "127.0.0.1"));
    }

    /** A 1 MiB POST echo through {@code client}. */
    private static void exchange(Vertx vertx, int port, List<RdmaChannel> connected, long seed) throws Exception {
        HttpClientAgent client = vertx.httpClientBuilder()
                .withConnectHandler(conn -> {
                    if (((ConnectionBase) conn).channel() instanceof RdmaChannel ch) {
                        connected.add(ch);
                    }
                })
                .build();
        try {
            byte[] body = new byte[1 << 20];
            new Random(seed).nextBytes(body);
            Buffer echoed = await(client.request(new RequestOptions().setMethod(HttpMethod.POST).setHost("127.0.0.1")
                            .setPort(port).setURI("/echo"))
                    .compose(req -> req.send(Buffer.buffer(body)).compose(resp -> resp.body())));
            assertThat(crc(echoed.getBytes())).isEqualTo(crc(body));
        } finally {
            await(client.close());
        }
    }

    @Test
    void aServerWithTcpListenAnswersAnRdmaClientAndAVertxTcpClient() throws Exception {
        Vertx server = rdma(new RdmaTransport().withTcpListen(true));
        Vertx rdmaClient = rdma(new RdmaTransport());
        Vertx tcpClient = Vertx.vertx();
        try {
            List<RdmaChannel> accepted = new CopyOnWriteArrayList<>();
            HttpServer http = echoServer(server, accepted);
            List<RdmaChannel> connected = new CopyOnWriteArrayList<>();
            exchange(rdmaClient, http.actualPort(), connected, 1);
            exchange(tcpClient, http.actualPort(), connected, 2);
            assertThat(connected).hasSize(1).allSatisfy(ch -> assertThat(ch.isTcp()).isFalse());
            assertThat(accepted).extracting(RdmaChannel::isTcp).containsExactly(false, true);
        } finally {
            await(tcpClient.close());
            await(rdmaClient.close());
            await(server.close());
        }
    }

    @Test
    void aClientWithTcpFallbackReachesAVertxTcpServer() throws Exception {
        Vertx server = Vertx.vertx();
        Vertx client = rdma(new RdmaTransport().withTcpFallback(true));
        try {
            HttpServer http = echoServer(server, new CopyOnWriteArrayList<>());
            List<RdmaChannel> connected = new CopyOnWriteArrayList<>();
            exchange(client, http.actualPort(), connected, 3);
            assertThat(connected).isNotEmpty().allSatisfy(ch -> {
                assertThat(ch.isTcp()).isTrue();
                assertThat(ch.fallbackReason()).isNotNull();
            });
        } finally {
            await(client.close());
            await(server.close());
        }
    }
}

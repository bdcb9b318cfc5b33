package io.netty.contrib.rdma.reactor;

import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaChannelOption;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import reactor.core.publisher.Mono;
import reactor.netty.ByteBufFlux;
import reactor.netty.DisposableServer;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;

import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * reactor-netty HTTP over an {@link RdmaChannel}'s TCP path: a dual-stack {@code HttpServer} on RDMA loops
 * ({@link RdmaChannelOption#TCP_LISTEN}) answers an RDMA client and reactor-netty's own TCP client on one port,
 * and an RDMA {@code HttpClient} with {@link RdmaChannelOption#TCP_FALLBACK} reaches a plain TCP server. Bodies
 * are checked by CRC.
 */
@Timeout(120)
class RdmaTcpPathsTest {
    static RdmaLoopResources loops;

    @BeforeAll
    static void setUp() {
        loops = RdmaLoopResources.create("tcp-paths", 2, true);
    }

    @AfterAll
    static void tearDown() {
        loops.disposeLater(Duration.ZERO, Duration.ofSeconds(5)).block(Duration.ofSeconds(10));
    }

    private static long crc(byte[] bytes) {
        CRC32 crc = new CRC32();
        crc.update(bytes);
        return crc.getValue();
    }

    private static HttpServer echoServer() {
        return HttpServer.create().host("127.0.0.1").port(0)
                .route(routes -> routes
                        .get("/hello", (req, res) -> res.sendString(Mono.just("hello")))
                        .post("/echo", (req, res) -> res.send(req.receive().retain())));
    }

    /** A GET and a 1 MiB POST echo through {@code client}. */
    private static void exchange(HttpClient client, long seed) {
        assertThat(client.get().uri("/hello").responseContent().aggregate().asString()
                .block(Duration.ofSeconds(20))).isEqualTo("hello");
        byte[] body = new byte[1 << 20];
        new Random(seed).nextBytes(body);
        byte[] echoed = client.post().uri("/echo").send(ByteBufFlux.fromInbound(Mono.just(body)))
                .responseContent().aggregate().asByteArray().block(Duration.ofSeconds(30));
        assertThat(echoed).hasSize(body.length);
        assertThat(crc(echoed)).isEqualTo(crc(body));
    }

    @Test
    void aDualStackHttpServerAnswersAnRdmaClientAndATcpClientOnOnePort() {
        List<RdmaChannel> accepted = new CopyOnWriteArrayList<>();
        DisposableServer server = echoServer().runOn(loops).option(RdmaChannelOption.TCP_LISTEN, true)
                .doOnConnection(c -> accepted.add((RdmaChannel) c.channel()))
                .bindNow(Duration.ofSeconds(10));
        try {
            exchange(HttpClient.create().runOn(loops).host("127.0.0.1").port(server.port()), 1);
            // reactor-netty's own loops and channels: a client that knows nothing of RDMA.
            exchange(HttpClient.create().host("127.0.0.1").port(server.port()), 2);
        } finally {
            server.disposeNow(Duration.ofSeconds(5));
        }
        assertThat(accepted).extracting(RdmaChannel::isTcp).contains(false, true);
    }

    @Test
    void anRdmaClientWithFallbackReachesAPlainTcpServer() {
        DisposableServer server = echoServer().bindNow(Duration.ofSeconds(10));
        List<RdmaChannel> connected = new CopyOnWriteArrayList<>();
        try {
            HttpClient client = HttpClient.create().runOn(loops).host("127.0.0.1").port(server.port())
                    .option(RdmaChannelOption.TCP_FALLBACK, true)
                    .doOnConnected(c -> connected.add((RdmaChannel) c.channel()));
            exchange(client, 3);
        } finally {
            server.disposeNow(Duration.ofSeconds(5));
        }
        assertThat(connected).isNotEmpty().allSatisfy(ch -> {
            assertThat(ch.isTcp()).isTrue();
            assertThat(ch.fallbackReason()).isNotNull();
        });
    }
}

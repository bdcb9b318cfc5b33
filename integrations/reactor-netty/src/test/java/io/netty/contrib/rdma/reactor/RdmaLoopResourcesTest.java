package io.netty.contrib.rdma.reactor;

import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.resolver.dns.DnsAddressResolverGroup;
import io.netty.resolver.dns.SingletonDnsServerAddressStreamProvider;
import io.netty.channel.epoll.EpollDatagramChannel;
import io.netty.channel.socket.DatagramChannel;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.ByteBufFlux;
import reactor.netty.Connection;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.websocketx.BinaryWebSocketFrame;
import io.netty.handler.codec.http.websocketx.TextWebSocketFrame;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.client.WebsocketClientSpec;
import reactor.netty.http.server.WebsocketServerSpec;
import reactor.netty.http.server.HttpServer;
import reactor.netty.tcp.TcpClient;
import reactor.netty.tcp.TcpServer;

import java.io.ByteArrayOutputStream;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * reactor-netty 1.3 on {@link RdmaLoopResources} over the software RDMA device: HTTP request/response (host name
 * resolved by reactor-netty's DNS resolver on the RDMA loop), a WebSocket exchange (text and a 256 KiB binary
 * frame), and a TCP echo of 4 MiB, each checked by CRC; every connection is an {@link RdmaChannel}.
 */
@Timeout(120)
class RdmaLoopResourcesTest {
    private static final String HOST = "server.rdma.test";
    static RdmaLoopResources loops;
    static TestDnsServer dns;

    @BeforeAll
    static void setUp() throws Exception {
        loops = RdmaLoopResources.create("test", 2, true);
        dns = new TestDnsServer(Map.of(HOST, InetAddress.getByName("127.0.0.1")));
    }

    @AfterAll
    static void tearDown() throws Exception {
        loops.disposeLater(Duration.ZERO, Duration.ofSeconds(5)).block(Duration.ofSeconds(10));
        assertThat(loops.isDisposed()).isTrue();
        dns.close();
    }

    private static long crc(byte[] bytes) {
        CRC32 crc = new CRC32();
        crc.update(bytes);
        return crc.getValue();
    }

    private static HttpClient client(int port, Set<Class<?>> channelTypes) {
        return HttpClient.create().runOn(loops).host(HOST).port(port)
                .doOnConnected(c -> channelTypes.add(c.channel().getClass()))
                .resolver(spec -> spec.searchDomains(List.of()).queryTimeout(Duration.ofSeconds(5))
                        .dnsAddressResolverGroupProvider(builder -> new DnsAddressResolverGroup(builder
                                .nameServerProvider(new SingletonDnsServerAddressStreamProvider(dns.address())))));
    }

    @Test
    void loopsHandOutRdmaChannelTypes() {
        assertThat(loops.onChannelClass(DatagramChannel.class, loops.onClient(true)))
                .isEqualTo(EpollDatagramChannel.class);
        assertThat(loops.onChannel(io.netty.channel.socket.SocketChannel.class, loops.onClient(true)))
                .isInstanceOf(RdmaChannel.class);
    }

    @Test
    void httpRequestResponseWithDnsOnTheRdmaLoop() {
        Set<Class<?>> channelTypes = ConcurrentHashMap.newKeySet();
        DisposableServer server = HttpServer.create().runOn(loops).host("127.0.0.1").port(0)
                .doOnConnection(c -> channelTypes.add(c.channel().getClass()))
                .route(routes -> routes
                        .get("/hello", (req, res) -> res.sendString(Mono.just("hello over RDMA")))
                        .post("/echo", (req, res) -> res.send(req.receive().retain())))
                .bindNow(Duration.ofSeconds(10));
        try {
            int queriesBefore = dns.queries.get();
            HttpClient client = client(server.port(), channelTypes);
            String hello = client.get().uri("/hello").responseContent().aggregate().asString()
                    .block(Duration.ofSeconds(20));
            assertThat(hello).isEqualTo("hello over RDMA");
            assertThat(dns.queries.get()).as("reactor-netty's resolver asked our DNS server")
                    .isGreaterThan(queriesBefore);
            byte[] body = new byte[3 << 20];
            new Random(3).nextBytes(body);
            byte[] echoed = client.post().uri("/echo").send(ByteBufFlux.fromInbound(Mono.just(body)))
                    .responseContent().aggregate().asByteArray().block(Duration.ofSeconds(30));
            assertThat(echoed).hasSize(body.length);
            assertThat(crc(echoed)).isEqualTo(crc(body));
        } finally {
            server.disposeNow(Duration.ofSeconds(5));
        }
        assertThat(channelTypes).containsExactly(RdmaChannel.class);
    }

    @Test
    void webSocketExchange() {
        Set<Class<?>> channelTypes = ConcurrentHashMap.newKeySet();
        DisposableServer server = HttpServer.create().runOn(loops).host("127.0.0.1").port(0)
                .doOnConnection(c -> channelTypes.add(c.channel().getClass()))
                .route(routes -> routes.ws("/ws", (in, out) -> out.sendObject(in.receiveFrames()
                        .map(frame -> frame.retain())),
                        WebsocketServerSpec.builder().maxFramePayloadLength(1 << 20).build()))
                .bindNow(Duration.ofSeconds(10));
        try {
            byte[] binary = new byte[256 << 10];
            new Random(5).nextBytes(binary);
            List<String> received = client(server.port(), channelTypes)
                    .websocket(WebsocketClientSpec.builder().maxFramePayloadLength(1 << 20).build())
                    .uri("/ws")
                    .handle((in, out) -> Flux.merge(
                            out.sendObject(Flux.just(new TextWebSocketFrame("ping"),
                                            new BinaryWebSocketFrame(Unpooled.wrappedBuffer(binary)),
                                            new TextWebSocketFrame("bye")))
                                    .then().thenMany(Flux.<String>empty()),
                            in.receiveFrames().take(3).map(frame -> {
                                if (frame instanceof TextWebSocketFrame t) {
                                    return "text:" + t.text();
                                }
                                byte[] bytes = new byte[frame.content().readableBytes()];
                                frame.content().getBytes(frame.content().readerIndex(), bytes);
                                return "binary:" + bytes.length + ":" + crc(bytes);
                            })))
                    .collectList()
                    .block(Duration.ofSeconds(30));
            assertThat(received).containsExactly("text:ping", "binary:" + binary.length + ":" + crc(binary),
                    "text:bye");
        } finally {
            server.disposeNow(Duration.ofSeconds(5));
        }
        assertThat(channelTypes).containsExactly(RdmaChannel.class);
    }

    @Test
    void tcpEcho() throws Exception {
        Set<Class<?>> channelTypes = ConcurrentHashMap.newKeySet();
        DisposableServer server = TcpServer.create().runOn(loops).host("127.0.0.1").port(0)
                .doOnConnection(c -> channelTypes.add(c.channel().getClass()))
                .handle((in, out) -> out.send(in.receive().retain()))
                .bindNow(Duration.ofSeconds(10));
        Connection connection = TcpClient.create().runOn(loops).host("127.0.0.1").port(server.port())
                .connectNow(Duration.ofSeconds(10));
        try {
            channelTypes.add(connection.channel().getClass());
            byte[] data = new byte[4 << 20];
            new Random(7).nextBytes(data);
            ByteArrayOutputStream echoed = new ByteArrayOutputStream();
            CountDownLatch done = new CountDownLatch(1);
            connection.inbound().receive().asByteArray().subscribe(bytes -> {
                synchronized (echoed) {
                    echoed.writeBytes(bytes);
                    if (echoed.size() >= data.length) {
                        done.countDown();
                    }
                }
            });
            List<byte[]> chunks = new ArrayList<>();
            for (int off = 0; off < data.length; off += 100_000) {
                chunks.add(Arrays.copyOfRange(data, off, Math.min(data.length, off + 100_000)));
            }
            connection.outbound().sendByteArray(Flux.fromIterable(chunks)).then().block(Duration.ofSeconds(30));
            assertThat(done.await(30, TimeUnit.SECONDS)).as("echo complete").isTrue();
            synchronized (echoed) {
                assertThat(echoed.size()).isEqualTo(data.length);
                assertThat(crc(echoed.toByteArray())).isEqualTo(crc(data));
            }
        } finally {
            connection.disposeNow(Duration.ofSeconds(5));
            server.disposeNow(Duration.ofSeconds(5));
        }
        assertThat(channelTypes).containsExactly(RdmaChannel.class);
    }
}

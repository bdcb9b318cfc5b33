package io.netty.contrib.rdma.vertx;

import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandlerConfig;
import io.netty.util.ResourceLeakDetector;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.dns.AddressResolverOptions;
import io.vertx.core.http.HttpClientAgent;
import io.vertx.core.http.HttpClientResponse;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.RequestOptions;
import io.vertx.core.internal.net.NetSocketInternal;
import io.vertx.core.net.NetClient;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetSocket;
import io.vertx.core.net.impl.ConnectionBase;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.net.InetAddress;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Vert.x 5 on {@link RdmaTransport} over the software RDMA device, under PARANOID leak detection: an HTTP server and
 * client (bodies from 1 B to 1 MiB, echoed and checked by CRC) and a {@code NetSocket} echo (up to 4 MiB), every
 * host name resolved by Vert.x's own DNS resolver (on Netty's {@code EpollDatagramChannel}s) against a DNS responder on
 * 127.0.0.1; the whole create/use/close cycle 20 times, each close done within 5 s; and no buffer leaked. It runs on
 * the default, adaptive loops and on blocking loops (spinNanos 0), whose wake-ups give other timings.
 *
 * <p>Each HTTP exchange is one chain whose step that gets the response also asks for its body:
 * {@code request.compose(req -> req.send(body).compose(resp -> resp.body()))}. The flat form,
 * {@code request.compose(req -> req.send(body)).compose(resp -> resp.body())}, is racy when built on a thread that
 * is not the request's event loop, such as this test's: if the response has already ended when that thread attaches
 * the last step, Vert.x 5.0.7 runs the step later as a task, and {@code HttpClientResponseImpl} has dropped the
 * chunks and the end it got while no body handler was there, so {@code body()} never completes
 * ({@link VertxResponseBodyRaceTest} shows it on NIO and on RDMA).
 */
@Timeout(300)
class RdmaTransportTest {
    private static final String HTTP_HOST = "http.rdma.test";
    private static final String NET_HOST = "net.rdma.test";
    private static final int CYCLES = 20;
    private static final String CANARY = "leaked on purpose by RdmaTransportTest";

    /** The event loops Vert.x runs on. */
    enum Loops {
        ADAPTIVE(new RdmaIoHandlerConfig()),
        BLOCKING(new RdmaIoHandlerConfig().spinNanos(0));

        final RdmaIoHandlerConfig config;

        Loops(RdmaIoHandlerConfig config) {
            this.config = config;
        }
    }

    @ParameterizedTest(name = "{0} loops")
    @EnumSource(Loops.class)
    void httpAndNetOverRdmaWithVertxDnsAndCleanClose(Loops loops) throws Exception {
        assertThat(ResourceLeakDetector.getLevel()).isEqualTo(ResourceLeakDetector.Level.PARANOID);
        // What an earlier run reported (its canary) is not this run's. The detector reports a trace once, so each
        // run's canary has its own.
        RecordingLeakDetector.LEAKS.clear();
        String canary = CANARY + " (" + loops + " loops)";
        InetAddress loopback = InetAddress.getByName("127.0.0.1");
        try (TestDnsServer dns = new TestDnsServer(Map.of(HTTP_HOST, loopback, NET_HOST, loopback))) {
            Random random = new Random(15);
            for (int cycle = 0; cycle < CYCLES; cycle++) {
                Set<Class<?>> channelTypes = ConcurrentHashMap.newKeySet();
                Vertx vertx = Vertx.builder()
                        .with(new VertxOptions().setEventLoopPoolSize(2).setAddressResolverOptions(
                                new AddressResolverOptions()
                                        .setServers(List.of("127.0.0.1:" + dns.address().getPort()))
                                        .setHostsValue(Buffer.buffer("# none\n"))
                                        .setSearchDomains(List.of())
                                        .setOptResourceEnabled(false)
                                        .setQueryTimeout(5000)))
                        .withTransport(RdmaTransport.transport(loops.config))
                        .build();
                long closeNanos;
                try {
                    http(vertx, random, channelTypes, cycle);
                    net(vertx, random, channelTypes, cycle);
                } finally {
                    long start = System.nanoTime();
                    await(vertx.close());
                    closeNanos = System.nanoTime() - start;
                }
                assertThat(TimeUnit.NANOSECONDS.toMillis(closeNanos)).as("Vert.x close of cycle %d, ms", cycle)
                        .isLessThan(5000);
                assertThat(channelTypes).as("server-side channels").containsExactly(RdmaChannel.class);
            }
            assertThat(dns.queries.get()).as("queries Vert.x's resolver sent").isGreaterThanOrEqualTo(2 * CYCLES);
        }
        leakOnPurpose(canary);
        collectLeaks(canary);
        long fromRing = RecordingLeakDetector.LEAKS.stream().filter(l -> l.contains("deliverRingBuffer")).count();
        assertThat(RecordingLeakDetector.LEAKS)
                .as("leaks reported (the canary is expected); %d of them were delivered from the receive ring"
                        + " (RdmaConnection.deliverRingBuffer), which Vert.x does not release", fromRing)
                .hasSize(1);
        assertThat(RecordingLeakDetector.LEAKS.getFirst()).contains(canary);
    }

    private static void http(Vertx vertx, Random random, Set<Class<?>> channelTypes, int cycle) throws Exception {
        List<Channel> channels = new java.util.concurrent.CopyOnWriteArrayList<>();
        HttpServer server = await(vertx.createHttpServer()
                .connectionHandler(conn -> channels.add(((ConnectionBase) conn).channel()))
                .requestHandler(req -> {
                    channelTypes.add(((ConnectionBase) req.connection()).channel().getClass());
                    req.body().onSuccess(body -> req.response().putHeader("x-cycle", String.valueOf(cycle))
                            .end(body));
                })
                .listen(0, "127.0.0.1"));
        HttpClientAgent client = vertx.httpClientBuilder()
                .withConnectHandler(conn -> channels.add(((ConnectionBase) conn).channel()))
                .build();
        try {
            int[] sizes = {1, 100, 8 << 10, (8 << 10) + 1, 64 << 10, 1 << 20};
            for (int size : sizes) {
                byte[] body = new byte[size];
                random.nextBytes(body);
                // body() in the step that gets the response, not in a step after it (see the class comment).
                Future<Buffer> reply = client.request(new RequestOptions().setMethod(HttpMethod.POST)
                                .setHost(HTTP_HOST).setPort(server.actualPort()).setURI("/echo"))
                        .compose(req -> req.send(Buffer.buffer(body)).compose(resp -> {
                            assertThat(resp.statusCode()).isEqualTo(200);
                            assertThat(resp.getHeader("x-cycle")).isEqualTo(String.valueOf(cycle));
                            return resp.body();
                        }));
                Buffer echoed = await(reply, "HTTP echo of " + size + " B in cycle " + cycle, channels);
                assertThat(echoed.length()).as("HTTP echo of %d B", size).isEqualTo(size);
                assertThat(crc(echoed.getBytes())).isEqualTo(crc(body));
            }
            HttpClientResponse get = await(client.request(HttpMethod.GET, server.actualPort(), HTTP_HOST, "/")
                    .compose(req -> req.send()));
            assertThat(get.statusCode()).isEqualTo(200);
        } finally {
            await(client.close());
            await(server.close());
        }
    }

    private static void net(Vertx vertx, Random random, Set<Class<?>> channelTypes, int cycle) throws Exception {
        List<Channel> channels = new java.util.concurrent.CopyOnWriteArrayList<>();
        NetServer server = await(vertx.createNetServer()
                .connectHandler(so -> {
                    Channel ch = ((NetSocketInternal) so).channelHandlerContext().channel();
                    channels.add(ch);
                    channelTypes.add(ch.getClass());
                    so.handler(so::write);
                })
                .listen(0, "127.0.0.1"));
        NetClient client = vertx.createNetClient();
        try {
            int size = cycle % 2 == 0 ? 4 << 20 : 100_000;
            byte[] data = new byte[size];
            random.nextBytes(data);
            NetSocket socket = await(client.connect(server.actualPort(), NET_HOST));
            Channel clientChannel = ((NetSocketInternal) socket).channelHandlerContext().channel();
            assertThat(clientChannel).isInstanceOf(RdmaChannel.class);
            channels.add(clientChannel);
            Promise<Buffer> done = Promise.promise();
            Buffer received = Buffer.buffer(size);
            socket.handler(buf -> {
                received.appendBuffer(buf);
                if (received.length() >= size) {
                    done.tryComplete(received);
                }
            });
            for (int off = 0; off < size; off += 64 << 10) {
                socket.write(Buffer.buffer(java.util.Arrays.copyOfRange(data, off, Math.min(size, off + (64 << 10)))));
            }
            Buffer echoed = await(done.future(), "NetSocket echo of " + size + " B in cycle " + cycle
                    + " (" + received.length() + " B back)", channels);
            assertThat(echoed.length()).as("NetSocket echo of %d B", size).isEqualTo(size);
            assertThat(crc(echoed.getBytes())).isEqualTo(crc(data));
            await(socket.close());
        } finally {
            await(client.close());
            await(server.close());
        }
    }

    private static long crc(byte[] bytes) {
        CRC32 crc = new CRC32();
        crc.update(bytes);
        return crc.getValue();
    }

    private static <T> T await(Future<T> future) throws Exception {
        return await(future, "a Vert.x operation", List.of());
    }

    /** On timeout, the message names the operation and the state of {@code channels}' RDMA connections. */
    private static <T> T await(Future<T> future, String what, List<Channel> channels) throws Exception {
        try {
            return future.toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            StringBuilder state = new StringBuilder();
            for (Channel ch : channels) {
                state.append("\n  ").append(ch).append(": ").append(connectionState(ch));
            }
            throw new AssertionError(what + " did not complete within 30 s; connections:" + state, e);
        }
    }

    /** The transport's view of a connection (its toString), read on its loop; for failure messages only. */
    private static String connectionState(Channel ch) {
        try {
            java.lang.reflect.Field f = RdmaChannel.class.getDeclaredField("connection");
            f.setAccessible(true);
            return ch.eventLoop().submit(() -> {
                var out = ch.unsafe().outboundBuffer();
                return f.get(ch) + ", active=" + ch.isActive() + ", autoRead=" + ch.config().isAutoRead()
                        + ", writable=" + ch.isWritable() + ", outbound=" + (out == null ? "none"
                        : out.size() + " messages, " + out.totalPendingWriteBytes() + " B");
            }).get(5, TimeUnit.SECONDS);
        } catch (Exception e) {
            return "(state unavailable: " + e + ")";
        }
    }

    private static void leakOnPurpose(String canary) {
        ByteBufAllocator.DEFAULT.directBuffer(64).writeLong(1).touch(canary);
    }

    /** Leaks are reported when a later tracked allocation finds a collected, unreleased buffer. */
    private static void collectLeaks(String canary) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        int extraRounds = 5;
        while (System.nanoTime() < deadline && extraRounds > 0) {
            if (RecordingLeakDetector.LEAKS.stream().anyMatch(leak -> leak.contains(canary))) {
                extraRounds--;
            }
            System.gc();
            Thread.sleep(10);
            UnpooledByteBufAllocator.DEFAULT.directBuffer(1).release();
        }
    }
}

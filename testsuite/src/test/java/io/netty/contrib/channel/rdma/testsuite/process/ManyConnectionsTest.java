package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.testsuite.TestAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A server JVM with default options holds many idle connections from this JVM at a small footprint each, then
 * some of them stream megabytes each way while the rest stay open, and closing everything returns every device
 * object. The count is {@code -Drdma.test.connections} (default 4000; the closing note of issue 12 reports a run
 * with 10 000). Memory is what the server holds for them: measured after a first wave (loop queues created, code
 * compiled) and after the rest, the growth of its resident set outside the Java heap (the heap is committed and
 * touched from the start, so garbage the connects leave in it does not count) plus the growth of the live heap
 * after a GC.
 */
@Timeout(900)
class ManyConnectionsTest {
    private static final int CONNECTIONS = Integer.getInteger("rdma.test.connections", 4000);
    private static final int FIRST_WAVE = 100;
    private static final int WAVE = 200;
    private static final int STREAMING = 64;
    private static final int STREAM_BYTES = 4 << 20;
    private static final long MAX_BYTES_PER_IDLE_CONNECTION = 64 << 10;

    @Test
    void manyIdleConnectionsThenSomeStreamWhileTheRestStayOpen() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        List<Channel> channels = new ArrayList<>();
        try (ChildJvm server = ChildJvm.start(List.of(), List.of("-Xms512m", "-Xmx512m", "-XX:+AlwaysPreTouch"),
                ConnectionsServerProcess.class)) {
            String line = server.awaitLine("PORT ", 150);
            assertThat(line).as(() -> "the server's PORT line; " + server.diagnose()).isNotNull();
            InetSocketAddress address = new InetSocketAddress(TestAddress.get(),
                    Integer.parseInt(line.substring(5).trim()));
            Bootstrap bootstrap = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            // idle until a test adds its handler
                        }
                    });

            connect(bootstrap, address, FIRST_WAVE, channels);
            Map<String, Long> before = status(server);
            long start = System.nanoTime();
            connect(bootstrap, address, CONNECTIONS - FIRST_WAVE, channels);
            double seconds = (System.nanoTime() - start) / 1e9;
            // A client's connect completes before the server sees ESTABLISHED (the client's last message).
            Map<String, Long> after = awaitStatus(server, st -> st.get("open") == CONNECTIONS);
            long nativeGrowth = after.get("rss") - before.get("rss");
            long heapGrowth = after.get("heap") - before.get("heap");
            long perConnection = (nativeGrowth + heapGrowth) / (CONNECTIONS - FIRST_WAVE);
            System.out.printf("ManyConnectionsTest: %d connections, %d after the first wave in %.1f s (%.0f/s); "
                            + "server %d B per connection: resident outside the heap %d -> %d MiB (%d B each, %d B of "
                            + "it shared memory), live heap after GC %d -> %d MiB (%d B each)%n",
                    CONNECTIONS, CONNECTIONS - FIRST_WAVE, seconds, (CONNECTIONS - FIRST_WAVE) / seconds,
                    perConnection, before.get("rss") >> 20, after.get("rss") >> 20,
                    nativeGrowth / (CONNECTIONS - FIRST_WAVE),
                    (after.get("shmem") - before.get("shmem")) / (CONNECTIONS - FIRST_WAVE),
                    before.get("heap") >> 20, after.get("heap") >> 20, heapGrowth / (CONNECTIONS - FIRST_WAVE));
            assertThat(after.get("open")).as("connections open at the server").isEqualTo(CONNECTIONS);
            assertThat(perConnection).as("server resident memory per idle connection")
                    .isLessThanOrEqualTo(MAX_BYTES_PER_IDLE_CONNECTION);

            stream(channels.subList(0, STREAMING));
            for (Channel c : channels) {
                assertThat(c.isActive()).as("an idle connection while others streamed").isTrue();
            }
            assertThat(status(server).get("open")).isEqualTo(CONNECTIONS);

            for (Channel c : channels) {
                c.close();
            }
            for (Channel c : channels) {
                c.closeFuture().sync();
            }
            // A closed connection's rdma_cm id is destroyed by its loop after the channel (RdmaIoHandler's deferred
            // close), so the ids are waited for too.
            Map<String, Long> closed = awaitStatus(server, s -> s.get("open") == 0 && s.getOrDefault("qp", 0L) == 0
                    && s.getOrDefault("cm_id", 1L) <= 1);
            assertThat(closed.get("open")).as("connections open at the server after the clients closed").isZero();
            if (closed.containsKey("qp")) {
                assertThat(closed.get("qp")).as("server QPs after the clients closed").isZero();
                assertThat(closed.get("cm_id")).as("server rdma_cm ids: the listener").isEqualTo(1);
            }
            server.closeInput();
            String last = server.awaitLine("FINAL", 60);
            assertThat(last).as(() -> "the server's FINAL line; " + server.diagnose()).isNotNull();
            for (String kind : ConnectionsServerProcess.KINDS) {
                if (last.contains(kind + "=")) {
                    assertThat(last).as("device objects left at the server").contains(" " + kind + "=0");
                }
            }
            assertThat(server.awaitExit(60)).as("server exit code").isZero();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    private static void connect(Bootstrap bootstrap, InetSocketAddress address, int count, List<Channel> into)
            throws InterruptedException {
        for (int done = 0; done < count; done += WAVE) {
            List<ChannelFuture> wave = new ArrayList<>();
            for (int i = done; i < Math.min(count, done + WAVE); i++) {
                wave.add(bootstrap.connect(address));
            }
            for (ChannelFuture f : wave) {
                f.sync();
                into.add(f.channel());
            }
        }
    }

    /** Each channel writes {@value #STREAM_BYTES} bytes and reads them back, checked by CRC, all at once. */
    private static void stream(List<Channel> streaming) throws Exception {
        byte[] message = new byte[STREAM_BYTES];
        new Random(12).nextBytes(message);
        CRC32 crc = new CRC32();
        crc.update(message);
        long expected = crc.getValue();
        List<CompletableFuture<Long>> echoed = new ArrayList<>();
        for (Channel c : streaming) {
            CompletableFuture<Long> done = new CompletableFuture<>();
            echoed.add(done);
            c.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                final CRC32 sum = new CRC32();
                long bytes;

                @Override
                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                    ByteBuf buf = (ByteBuf) msg;
                    bytes += buf.readableBytes();
                    sum.update(buf.nioBuffer());
                    buf.release();
                    if (bytes == STREAM_BYTES) {
                        done.complete(sum.getValue());
                    }
                }
            });
        }
        for (Channel c : streaming) {
            // In parts, as a stream: the receiver sees large writes and offers its ring.
            for (int off = 0; off < STREAM_BYTES; off += 256 << 10) {
                c.write(Unpooled.wrappedBuffer(message, off, 256 << 10));
            }
            c.flush();
        }
        for (int i = 0; i < echoed.size(); i++) {
            try {
                assertThat(echoed.get(i).get(120, TimeUnit.SECONDS)).as("CRC of an echoed stream").isEqualTo(expected);
            } catch (java.util.concurrent.TimeoutException e) {
                throw new AssertionError("stream " + i + " stalled; client side: " + state(streaming.get(i)), e);
            }
        }
    }

    /** The channel's connection state, read on its loop (a package-private field, for diagnosis only). */
    private static String state(Channel channel) throws Exception {
        return channel.eventLoop().submit(() -> {
            java.lang.reflect.Field f = channel.getClass().getDeclaredField("connection");
            f.setAccessible(true);
            return String.valueOf(f.get(channel));
        }).get(10, TimeUnit.SECONDS);
    }

    private static Map<String, Long> status(ChildJvm server) throws Exception {
        server.send("STATUS");
        String line = server.awaitLine("STATUS ", 60);
        assertThat(line).as(() -> "the server's STATUS line; " + server.diagnose()).isNotNull();
        Map<String, Long> values = new HashMap<>();
        for (String field : line.substring(7).trim().split(" ")) {
            String[] kv = field.split("=");
            values.put(kv[0], Long.parseLong(kv[1]));
        }
        return values;
    }

    private static Map<String, Long> awaitStatus(ChildJvm server, java.util.function.Predicate<Map<String, Long>> ok)
            throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        Map<String, Long> s = status(server);
        while (!ok.test(s) && System.nanoTime() < deadline) {
            Thread.sleep(200);
            s = status(server);
        }
        return s;
    }
}

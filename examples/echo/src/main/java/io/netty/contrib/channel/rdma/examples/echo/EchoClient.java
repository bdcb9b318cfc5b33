package io.netty.contrib.channel.rdma.examples.echo;

import io.netty.bootstrap.Bootstrap;
import io.netty.contrib.channel.rdma.RdmaChannelOption;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.util.concurrent.Promise;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

/**
 * Sends messages to an {@link EchoServer} one at a time per connection, checks that every echo is the message
 * sent (CRC32), and prints round-trip percentiles and throughput. Exits 0 only when every echo matched.
 * {@code --warmup N} sends N echoes per connection first (checked too, not measured): the JIT compilers of both
 * JVMs take their first ten thousand or so round trips to compile the path, and on a small machine they compete
 * with spinning event loops for the cores.
 *
 * <p>The connections are set up one after the other; how long that took (from {@code connect()} to the channel
 * being active) is printed before the first echo. {@code --connect-timeout} bounds each set-up as a whole
 * ({@code ChannelOption.CONNECT_TIMEOUT_MILLIS}); over RDMA its first step, rdma_cm's address resolution, keeps its
 * own timeout ({@code RdmaChannelOption.RESOLVE_TIMEOUT_MILLIS}, 2 s), which ends the attempt early when the peer's
 * address does not resolve (ADDR_ERROR).
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp ... EchoClient [--address 127.0.0.1] [--port 7474] [--size 64]
 *      [--count 10000] [--warmup 0] [--concurrency 1] [--busy-poll] [--stats] [--transport rdma|epoll|nio]
 *      [--connect-timeout 30] [--tos 0]
 * </pre>
 */
public final class EchoClient {
    private EchoClient() {
    }

    public static void main(String[] args) throws Exception {
        Options options = Options.parse(args);
        options.selectDevice();
        System.exit(run(options) ? 0 : 1);
    }

    static boolean run(Options options) throws InterruptedException {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(options.threads, options.ioHandlerFactory());
        try {
            List<PingPongHandler> handlers = new ArrayList<>();
            List<Channel> channels = new ArrayList<>();
            long connectStart = System.nanoTime();
            long slowestConnect = 0;
            for (int i = 0; i < options.concurrency; i++) {
                PingPongHandler handler = new PingPongHandler(options.size, options.warmup, options.count,
                        group.next().newPromise());
                Bootstrap b = new Bootstrap().group(group).channel(options.channelClass())
                        .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, options.connectTimeoutSeconds * 1000)
                        .handler(new ChannelInitializer<SocketChannel>() {
                            @Override
                            protected void initChannel(SocketChannel ch) {
                                ch.pipeline().addLast(handler);
                            }
                        });
                if (options.tcpFallback) {
                    b.option(RdmaChannelOption.TCP_FALLBACK, true);
                    if (options.tcpFallbackTimeoutMillis > 0) {
                        b.option(RdmaChannelOption.TCP_FALLBACK_TIMEOUT_MILLIS, options.tcpFallbackTimeoutMillis);
                    }
                }
                if (options.tos != 0) {
                    b.option(ChannelOption.IP_TOS, options.tos);
                }
                long t = System.nanoTime();
                channels.add(b.connect(options.address, options.port).sync().channel());
                slowestConnect = Math.max(slowestConnect, System.nanoTime() - t);
                handlers.add(handler);
            }
            System.out.printf("connected %d connection(s) in %d ms (the slowest %d ms)%n", options.concurrency,
                    (System.nanoTime() - connectStart) / 1_000_000, slowestConnect / 1_000_000);
            if (channels.getFirst() instanceof RdmaChannel rdma && rdma.isTcp()) {
                System.out.println("over TCP instead of RDMA: " + rdma.fallbackReason());
            }
            for (PingPongHandler handler : handlers) {
                handler.start();
            }
            boolean ok = true;
            long[] all = new long[options.count * options.concurrency];
            int n = 0;
            long start = Long.MAX_VALUE;
            long end = Long.MIN_VALUE;
            for (PingPongHandler handler : handlers) {
                if (!handler.done.await(120 + options.warmup / 1000, TimeUnit.SECONDS)) {
                    System.err.println("timed out after 120 s waiting for echoes");
                    return false;
                }
                if (!handler.done.isSuccess()) {
                    System.err.println("echo failed: " + handler.done.cause());
                    ok = false;
                    continue;
                }
                System.arraycopy(handler.rtts, 0, all, n, handler.rtts.length);
                n += handler.rtts.length;
                start = Math.min(start, handler.measuredFrom);
                end = Math.max(end, handler.measuredTo);
            }
            long elapsed = end - start;
            if (options.stats && options.transport == Options.Transport.RDMA) {
                printStats(channels);
            }
            for (Channel ch : channels) {
                ch.close().sync();
            }
            if (ok) {
                report(options, Arrays.copyOf(all, n), elapsed);
            }
            return ok;
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    /** What the transport counted: each connection's {@code RdmaChannel.metric()} and each loop's. */
    private static void printStats(List<Channel> channels) {
        Set<EventLoop> loops = new LinkedHashSet<>();
        for (Channel ch : channels) {
            System.out.println("connection " + ch.localAddress() + ": " + ((RdmaChannel) ch).metric());
            loops.add(ch.eventLoop());
        }
        for (EventLoop loop : loops) {
            System.out.println("loop " + loop + ": " + RdmaIoHandler.metric(loop));
        }
    }

    private static void report(Options o, long[] rtts, long elapsedNanos) {
        Arrays.sort(rtts);
        double seconds = elapsedNanos / 1e9;
        System.out.printf("%s: %d echoes of %d B over %d connection(s)%s: all verified (CRC32)%n",
                o.transport.name().toLowerCase(Locale.ROOT), rtts.length, o.size, o.concurrency,
                o.warmup > 0 ? " after " + o.warmup + " warm-up echoes each" : "");
        System.out.printf("round trip: p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us%n",
                percentile(rtts, 50) / 1e3, percentile(rtts, 99) / 1e3, percentile(rtts, 99.9) / 1e3,
                rtts[rtts.length - 1] / 1e3);
        System.out.printf("throughput: %.0f messages/s, %.2f MB/s each way%n", rtts.length / seconds,
                (double) rtts.length * o.size / seconds / 1e6);
    }

    private static long percentile(long[] sorted, double p) {
        int index = (int) Math.ceil(p / 100 * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, index))];
    }

    /**
     * One message in flight: send, wait for all of its bytes to come back, check, send the next. The first
     * {@code warmup} echoes are checked but not measured.
     */
    static final class PingPongHandler extends ChannelInboundHandlerAdapter {
        final long[] rtts;
        final Promise<Void> done;
        long measuredFrom;
        long measuredTo;
        private final int warmup;
        private final byte[] message;
        private final long expectedCrc;
        private final CRC32 crc = new CRC32();
        private ChannelHandlerContext ctx;
        private int sent;
        private int echoed;
        private int received;
        private long sentAt;

        PingPongHandler(int size, int warmup, int count, Promise<Void> done) {
            this.warmup = warmup;
            this.rtts = new long[count];
            this.done = done;
            this.message = new byte[size];
            ThreadLocalRandom.current().nextBytes(message);
            CRC32 c = new CRC32();
            c.update(message);
            this.expectedCrc = c.getValue();
        }

        @Override
        public void handlerAdded(ChannelHandlerContext ctx) {
            this.ctx = ctx;
        }

        void start() {
            ctx.channel().eventLoop().execute(this::sendNext);
        }

        private void sendNext() {
            ByteBuf buf = ctx.alloc().directBuffer(message.length).writeBytes(message);
            sentAt = System.nanoTime();
            if (echoed == warmup) {
                measuredFrom = sentAt;
            }
            ctx.writeAndFlush(buf).addListener(f -> {
                if (!f.isSuccess()) {
                    done.tryFailure(f.cause());
                }
            });
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            try {
                crc.update(buf.nioBuffer());
                received += buf.readableBytes();
            } finally {
                buf.release();
            }
            if (received > message.length) {
                done.tryFailure(new IllegalStateException("received " + received + " bytes for a message of "
                        + message.length));
            } else if (received == message.length) {
                long now = System.nanoTime();
                if (echoed++ >= warmup) {
                    rtts[sent++] = now - sentAt;
                }
                if (crc.getValue() != expectedCrc) {
                    done.tryFailure(new IllegalStateException("echo " + echoed + " differs from the message sent"));
                    return;
                }
                crc.reset();
                received = 0;
                if (sent == rtts.length) {
                    measuredTo = now;
                    done.trySuccess(null);
                } else {
                    sendNext();
                }
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            done.tryFailure(new IllegalStateException("connection closed after " + echoed + " echoes"));
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.tryFailure(cause);
            ctx.close();
        }
    }
}

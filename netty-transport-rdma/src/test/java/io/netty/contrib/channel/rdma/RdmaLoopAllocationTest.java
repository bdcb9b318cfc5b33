package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.util.ResourceLeakDetector;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.Promise;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The heap the event-loop threads allocate per echo once the paths are compiled: the goal is none. Echoes one
 * 64-byte message at a time (the same buffer every time, handlers that allocate nothing), so what the loop threads
 * allocate is the transport's. Counted with {@code ThreadMXBean#getThreadAllocatedBytes}, which is exact (no
 * timing): each round of echoes is measured, and the median round must stay under the bound, so one
 * deoptimisation and recompilation in a round (which allocates while it runs) does not fail the test, nor does
 * C2 happening to scalar-replace an allocation in a late round hide one that the other rounds make (errno capture
 * on the blocking path did that: 3.8 B per echo for most rounds, 0.01 once compiled differently).
 *
 * <p>Netty's leak detector is switched off for the measured rounds: at its default level it samples one buffer
 * allocation in 128 and allocates a tracking record for it (about 1-2 B per echo on average, a property of
 * Netty, not of the transport); the test prints what it is with the detector on.
 */
@Timeout(300)
class RdmaLoopAllocationTest {
    // Through reflection: the module this test is compiled into does not read java.management / jdk.management.
    private static final Object THREADS;
    private static final Method ALLOCATED;

    static {
        try {
            THREADS = Class.forName("java.lang.management.ManagementFactory").getMethod("getThreadMXBean")
                    .invoke(null);
            ALLOCATED = Class.forName("com.sun.management.ThreadMXBean")
                    .getMethod("getThreadAllocatedBytes", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private static final int SIZE = 64;
    private static final int WARMUP = Integer.getInteger("rdma.test.allocation.warmup", 30_000);
    private static final int ECHOES = Integer.getInteger("rdma.test.allocation.echoes", 4_000);
    private static final int ROUNDS = Integer.getInteger("rdma.test.allocation.rounds", 6);
    /** Bytes per echo, server and client loop together; the loop aims at 0. */
    private static final double BOUND = 1.0;

    @BeforeAll
    static void setUp() {
        SoftwareRdma.use();
    }

    /** Spins 0 ns: every wait blocks in epoll_wait, so the blocking path (arm, wait, take the event, wake) runs per echo. */
    @Test
    void blockingLoopsAllocateNothingPerEcho() throws Exception {
        measure("blocking", new RdmaIoHandlerConfig().spinNanos(0));
    }

    /** The default adaptive loop: spins, then blocks. */
    @Test
    void adaptiveLoopsAllocateNothingPerEcho() throws Exception {
        measure("adaptive", new RdmaIoHandlerConfig());
    }

    private static void measure(String name, RdmaIoHandlerConfig config) throws Exception {
        LoopThread serverThread = new LoopThread("alloc-server");
        LoopThread clientThread = new LoopThread("alloc-client");
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, serverThread,
                RdmaIoHandler.newFactory(config));
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, clientThread,
                RdmaIoHandler.newFactory(config));
        ResourceLeakDetector.Level level = ResourceLeakDetector.getLevel();
        // Under PARANOID (the leak-tests JVM, or a run that asks for it) every buffer is tracked, whatever the level
        // is switched to later: nothing to measure there.
        assumeTrue(level != ResourceLeakDetector.Level.PARANOID, "leak detection is " + level);
        try {
            Channel server = new ServerBootstrap().group(serverGroup).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(Echo.INSTANCE);
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            Channel client = new Bootstrap().group(clientGroup).channel(RdmaChannel.class)
                    .handler(new PingPong()).connect(server.localAddress()).sync().channel();
            PingPong pingPong = client.pipeline().get(PingPong.class);
            pingPong.run(WARMUP);

            List<Double> withDetector = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                withDetector.add(perEcho(pingPong, serverThread, clientThread));
            }
            ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.DISABLED);
            pingPong.run(ECHOES); // buffers tracked before the switch are gone
            List<Double> rounds = new ArrayList<>();
            for (int i = 0; i < ROUNDS; i++) {
                rounds.add(perEcho(pingPong, serverThread, clientThread));
            }
            double median = rounds.stream().mapToDouble(Double::doubleValue).sorted().skip(ROUNDS / 2).findFirst()
                    .orElseThrow();
            System.out.printf(Locale.ROOT, "%s loops, B per %d-byte echo (server + client loop threads):"
                    + " leak detector %s %s; disabled, rounds of %d: %s%n", name, SIZE, level, withDetector,
                    ECHOES, rounds.stream().map(d -> String.format(Locale.ROOT, "%.2f", d)).toList());
            assertThat(median).as("heap allocated by the loop threads per echo (median of %s)", rounds)
                    .isLessThan(BOUND);
            client.close().sync();
            server.close().sync();
        } finally {
            ResourceLeakDetector.setLevel(level);
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    private static double perEcho(PingPong pingPong, LoopThread server, LoopThread client) throws Exception {
        long before = server.allocated() + client.allocated();
        pingPong.run(ECHOES);
        long after = server.allocated() + client.allocated();
        return (double) (after - before) / ECHOES;
    }

    /** Remembers the one thread of its group. */
    private static final class LoopThread implements ThreadFactory {
        private final ThreadFactory delegate;
        private volatile Thread thread;

        LoopThread(String name) {
            delegate = new DefaultThreadFactory(name);
        }

        @Override
        public Thread newThread(Runnable r) {
            Thread t = delegate.newThread(r);
            thread = t;
            return t;
        }

        long allocated() throws ReflectiveOperationException {
            return (long) ALLOCATED.invoke(THREADS, thread.threadId());
        }
    }

    @Sharable
    private static final class Echo extends ChannelInboundHandlerAdapter {
        static final Echo INSTANCE = new Echo();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg, ctx.voidPromise());
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }

    /** Sends one message, waits for all of it to come back, sends it again: the same buffer every time. */
    private static final class PingPong extends ChannelInboundHandlerAdapter {
        private ChannelHandlerContext ctx;
        private ByteBuf message;
        private int received;
        private int remaining;
        private Promise<Void> done;

        @Override
        public void handlerAdded(ChannelHandlerContext ctx) {
            this.ctx = ctx;
        }

        void run(int echoes) throws Exception {
            Promise<Void> promise = ctx.executor().newPromise();
            ctx.executor().execute(() -> {
                if (message == null) {
                    message = ctx.alloc().directBuffer(SIZE, SIZE);
                    for (int i = 0; i < SIZE; i++) {
                        message.writeByte(i);
                    }
                }
                done = promise;
                remaining = echoes;
                send();
            });
            assertThat(promise.await(120, TimeUnit.SECONDS)).as("echoes done in time").isTrue();
            promise.sync();
        }

        private void send() {
            message.retain().readerIndex(0);
            received = 0;
            ctx.writeAndFlush(message, ctx.voidPromise());
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            received += buf.readableBytes();
            buf.release();
            if (received < SIZE) {
                return;
            }
            if (received > SIZE) {
                done.tryFailure(new IllegalStateException(received + " bytes came back for " + SIZE));
            } else if (--remaining == 0) {
                done.trySuccess(null);
            } else {
                send();
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (done != null) {
                done.tryFailure(new IllegalStateException("echo connection closed"));
            }
            if (message != null) {
                message.release();
                message = null;
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            if (done != null) {
                done.tryFailure(cause);
            }
            ctx.close();
        }
    }
}

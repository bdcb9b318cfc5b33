package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.Promise;

import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Two one-thread RDMA loops of this JVM, a server that echoes and a client that sends one message at a time (the
 * same buffer every time, handlers that allocate nothing), and what their threads did: heap allocated, CPU used,
 * how often they went to sleep. What the loop threads do per echo is then the transport's.
 */
final class EchoLoops implements AutoCloseable {
    // Through reflection: the module this test is compiled into does not read java.management / jdk.management.
    private static final Object THREADS;
    private static final Method ALLOCATED;
    private static final Method CPU;

    static {
        try {
            THREADS = Class.forName("java.lang.management.ManagementFactory").getMethod("getThreadMXBean")
                    .invoke(null);
            ALLOCATED = Class.forName("com.sun.management.ThreadMXBean")
                    .getMethod("getThreadAllocatedBytes", long.class);
            CPU = Class.forName("java.lang.management.ThreadMXBean").getMethod("getThreadCpuTime", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final LoopThread serverThread = new LoopThread("echo-server");
    final LoopThread clientThread = new LoopThread("echo-client");
    private final EventLoopGroup serverGroup;
    private final EventLoopGroup clientGroup;
    private final Channel server;
    private final Channel client;
    final PingPong pingPong;

    EchoLoops(RdmaIoHandlerConfig config, int size) throws InterruptedException {
        serverGroup = new MultiThreadIoEventLoopGroup(1, serverThread, RdmaIoHandler.newFactory(config));
        clientGroup = new MultiThreadIoEventLoopGroup(1, clientThread, RdmaIoHandler.newFactory(config));
        try {
            server = new ServerBootstrap().group(serverGroup).channel(RdmaServerChannel.class)
                    .childHandler(Echo.INSTANCE).bind(TestAddress.get(), 0).sync().channel();
            client = new Bootstrap().group(clientGroup).channel(RdmaChannel.class)
                    .handler(new PingPong(size)).connect(server.localAddress()).sync().channel();
        } catch (RuntimeException | InterruptedException e) {
            shutdown();
            throw e;
        }
        pingPong = client.pipeline().get(PingPong.class);
    }

    /** Heap the two loop threads allocated so far. */
    long allocated() throws ReflectiveOperationException {
        return serverThread.allocated() + clientThread.allocated();
    }

    /** CPU nanoseconds the two loop threads used so far. */
    long cpuNanos() throws ReflectiveOperationException {
        return serverThread.cpuNanos() + clientThread.cpuNanos();
    }

    /** How often the two loop threads went to sleep so far (voluntary context switches). */
    long sleeps() throws IOException {
        return serverThread.sleeps() + clientThread.sleeps();
    }

    @Override
    public void close() throws InterruptedException {
        try {
            client.close().sync();
            server.close().sync();
        } finally {
            shutdown();
        }
    }

    private void shutdown() throws InterruptedException {
        clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }

    /** Remembers the one thread of its group, and its {@code /proc} entry. */
    static final class LoopThread implements ThreadFactory {
        private final ThreadFactory delegate;
        private volatile Thread thread;
        private volatile Path task;

        LoopThread(String name) {
            delegate = new DefaultThreadFactory(name);
        }

        @Override
        public Thread newThread(Runnable r) {
            Thread t = delegate.newThread(() -> {
                try {
                    task = Path.of("/proc").resolve(Files.readSymbolicLink(Path.of("/proc/thread-self")));
                } catch (IOException e) {
                    throw new IllegalStateException("no /proc/thread-self", e);
                }
                r.run();
            });
            thread = t;
            return t;
        }

        long allocated() throws ReflectiveOperationException {
            return (long) ALLOCATED.invoke(THREADS, thread.threadId());
        }

        long cpuNanos() throws ReflectiveOperationException {
            return (long) CPU.invoke(THREADS, thread.threadId());
        }

        /**
         * Voluntary context switches: each is a wait that blocked (epoll_wait, a futex), not a preemption. Thread.yield
         * does not count.
         */
        long sleeps() throws IOException {
            for (String line : Files.readAllLines(task.resolve("status"))) {
                if (line.startsWith("voluntary_ctxt_switches:")) {
                    return Long.parseLong(line.substring(line.indexOf(':') + 1).trim());
                }
            }
            throw new IOException("no voluntary_ctxt_switches in " + task.resolve("status"));
        }
    }

    @Sharable
    static final class Echo extends ChannelInboundHandlerAdapter {
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
    static final class PingPong extends ChannelInboundHandlerAdapter {
        private final int size;
        private ChannelHandlerContext ctx;
        private ByteBuf message;
        private int received;
        private int remaining;
        private Promise<Void> done;

        PingPong(int size) {
            this.size = size;
        }

        @Override
        public void handlerAdded(ChannelHandlerContext ctx) {
            this.ctx = ctx;
        }

        void run(int echoes) throws Exception {
            Promise<Void> promise = ctx.executor().newPromise();
            ctx.executor().execute(() -> {
                if (message == null) {
                    message = ctx.alloc().directBuffer(size, size);
                    for (int i = 0; i < size; i++) {
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
            if (received < size) {
                return;
            }
            if (received > size) {
                done.tryFailure(new IllegalStateException(received + " bytes came back for " + size));
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

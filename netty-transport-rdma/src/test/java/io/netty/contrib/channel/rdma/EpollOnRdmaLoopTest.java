package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoEvent;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoEvent;
import io.netty.channel.epoll.EpollIoHandle;
import io.netty.channel.epoll.EpollIoOps;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.unix.FileDescriptor;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Netty's epoll channels and handles on an {@link RdmaIoHandler} loop ({@link EpollHandles}): the registration
 * contract of Netty's {@code EpollIoHandler} (pending until the first ops, {@code NONE} removes, edge- and
 * level-triggered readiness, cancel from another thread), an RDMA echo and an epoll TCP echo on one loop at once,
 * and a loop that loads without the epoll classes.
 */
@Timeout(60)
class EpollOnRdmaLoopTest {
    private static final long QUIET_MILLIS = 200;
    static EventLoopGroup group;
    private IoEventLoop loop;
    private FileDescriptor[] pipe;
    private IoRegistration registration;

    @BeforeAll
    static void setUp() {
        SoftwareRdma.use();
        Epoll.ensureAvailability();
        group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
    }

    @AfterAll
    static void tearDown() throws Exception {
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }

    @BeforeEach
    void openPipe() throws Exception {
        loop = (IoEventLoop) group.next();
        pipe = FileDescriptor.pipe();
    }

    @AfterEach
    void closePipe() throws Exception {
        pipe[0].close();
        pipe[1].close();
    }

    /** An epoll handle on the pipe's read end that records what the loop tells it. */
    private static final class PipeHandle implements EpollIoHandle {
        final BlockingQueue<Object> calls = new LinkedBlockingQueue<>();
        final FileDescriptor fd;
        final IoEventLoop loop;

        PipeHandle(FileDescriptor fd, IoEventLoop loop) {
            this.fd = fd;
            this.loop = loop;
        }

        @Override
        public FileDescriptor fd() {
            return fd;
        }

        @Override
        public void handle(IoRegistration registration, IoEvent ioEvent) {
            assertThat(loop.inEventLoop()).isTrue();
            calls.add(((EpollIoEvent) ioEvent).ops().value());
        }

        @Override
        public void registered() {
            calls.add("registered");
        }

        @Override
        public void unregistered() {
            calls.add(loop.inEventLoop() ? "unregistered" : "unregistered off the loop");
        }

        @Override
        public void close() {
        }

        Object next() throws InterruptedException {
            Object call = calls.poll(10, TimeUnit.SECONDS);
            assertThat(call).as("a call within 10 s").isNotNull();
            return call;
        }

        void assertQuiet() throws InterruptedException {
            assertThat(calls.poll(QUIET_MILLIS, TimeUnit.MILLISECONDS)).as("no call").isNull();
        }
    }

    /** A handle on the pipe's read end, registered ({@link #registration}) and told so. */
    private PipeHandle registered() throws Exception {
        PipeHandle handle = new PipeHandle(pipe[0], loop);
        registration = loop.register(handle).sync().getNow();
        assertThat(handle.next()).isEqualTo("registered");
        return handle;
    }

    private long submit(EpollIoOps ops) throws Exception {
        return loop.submit(() -> registration.submit(ops)).get(10, TimeUnit.SECONDS);
    }

    private void writeByte() throws Exception {
        ByteBuffer one = ByteBuffer.allocateDirect(1).put(0, (byte) 1);
        assertThat(pipe[1].write(one, 0, 1)).isEqualTo(1);
    }

    @Test
    void isCompatibleWithEpollHandlesAndAttachesNettysNativeArrays() throws Exception {
        assertThat(loop.isCompatible(EpollIoHandle.class)).isTrue();
        assertThat(loop.isCompatible(PipeHandle.class)).isTrue();
        registered();
        assertThat(registration.<Object>attachment().getClass().getName())
                .isEqualTo("io.netty.channel.epoll.NativeArrays");
        registration.cancel();
    }

    @Test
    void pendingUntilTheFirstOpsThenLevelTriggered() throws Exception {
        PipeHandle handle = registered();
        writeByte();
        handle.assertQuiet(); // not in the epoll set yet
        assertThat(submit(EpollIoOps.EPOLLIN)).isEqualTo(EpollIoOps.EPOLLIN.value());
        assertThat(handle.next()).isEqualTo(EpollIoOps.EPOLLIN.value());
        // Level-triggered: unread data is reported again.
        assertThat(handle.next()).isEqualTo(EpollIoOps.EPOLLIN.value());
        registration.cancel();
    }

    @Test
    void edgeTriggeredReportsEachArrivalOnce() throws Exception {
        PipeHandle handle = registered();
        submit(EpollIoOps.EPOLLIN.with(EpollIoOps.EPOLLET));
        writeByte();
        assertThat(handle.next()).isEqualTo(EpollIoOps.EPOLLIN.value());
        handle.assertQuiet(); // unread, but no new edge
        writeByte();
        assertThat(handle.next()).isEqualTo(EpollIoOps.EPOLLIN.value());
        handle.assertQuiet();
        registration.cancel();
    }

    @Test
    void noneRemovesTheFdAndLaterOpsAddItAgain() throws Exception {
        PipeHandle handle = registered();
        submit(EpollIoOps.EPOLLIN.with(EpollIoOps.EPOLLET));
        writeByte();
        assertThat(handle.next()).isEqualTo(EpollIoOps.EPOLLIN.value());
        assertThat(submit(EpollIoOps.NONE)).isZero();
        writeByte();
        handle.assertQuiet();
        submit(EpollIoOps.EPOLLIN);
        assertThat(handle.next()).isEqualTo(EpollIoOps.EPOLLIN.value());
        registration.cancel();
    }

    @Test
    void cancelFromAnotherThreadUnregistersOnTheLoop() throws Exception {
        PipeHandle handle = registered();
        submit(EpollIoOps.EPOLLIN.with(EpollIoOps.EPOLLET));
        assertThat(registration.cancel()).isTrue();
        assertThat(registration.cancel()).isFalse();
        assertThat(registration.isValid()).isFalse();
        assertThat(handle.next()).isEqualTo("unregistered");
        assertThat(registration.submit(EpollIoOps.EPOLLIN)).isEqualTo(-1);
        writeByte();
        handle.assertQuiet();
        // The fd can be registered again, as a channel's is after deregister(); the old handle hears nothing.
        PipeHandle again = registered();
        submit(EpollIoOps.EPOLLIN.with(EpollIoOps.EPOLLET));
        assertThat(again.next()).isEqualTo(EpollIoOps.EPOLLIN.value());
        handle.assertQuiet();
        registration.cancel();
    }

    @Sharable
    private static final class Echo extends ChannelInboundHandlerAdapter {
        static final Echo INSTANCE = new Echo();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }

    /** Sends {@code data} in chunks and completes with the CRC of what comes back once all of it has. */
    private static final class Sender extends ChannelInboundHandlerAdapter {
        final CompletableFuture<Long> echoed = new CompletableFuture<>();
        final byte[] data;
        final CRC32 crc = new CRC32();
        int received;

        Sender(byte[] data) {
            this.data = data;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            for (int off = 0; off < data.length; off += 10_000) {
                ctx.write(ctx.alloc().buffer().writeBytes(data, off, Math.min(10_000, data.length - off)));
            }
            ctx.flush();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            received += buf.readableBytes();
            crc.update(buf.nioBuffer());
            buf.release();
            if (received == data.length) {
                echoed.complete(crc.getValue());
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            echoed.completeExceptionally(cause);
        }
    }

    @Test
    void rdmaEchoAndEpollTcpEchoOnOneLoopAtOnce() throws Exception {
        byte[] data = new byte[4 << 20];
        new Random(7).nextBytes(data);
        CRC32 expected = new CRC32();
        expected.update(data);
        Channel rdmaServer = new ServerBootstrap().group(loop).channel(RdmaServerChannel.class)
                .childHandler(Echo.INSTANCE).bind(TestAddress.get(), 0).sync().channel();
        Channel tcpServer = new ServerBootstrap().group(loop).channel(EpollServerSocketChannel.class)
                .childHandler(Echo.INSTANCE).bind(InetAddress.getLoopbackAddress(), 0).sync().channel();
        Sender rdma = new Sender(data);
        Sender tcp = new Sender(data);
        Channel rdmaClient = new Bootstrap().group(loop).channel(RdmaChannel.class).handler(rdma)
                .connect(rdmaServer.localAddress()).sync().channel();
        Channel tcpClient = new Bootstrap().group(loop).channel(EpollSocketChannel.class).handler(tcp)
                .connect((InetSocketAddress) tcpServer.localAddress()).sync().channel();
        try {
            assertThat(rdma.echoed.get(30, TimeUnit.SECONDS)).isEqualTo(expected.getValue());
            assertThat(tcp.echoed.get(30, TimeUnit.SECONDS)).isEqualTo(expected.getValue());
            assertThat(tcpClient.eventLoop()).isSameAs(rdmaClient.eventLoop());
        } finally {
            for (Channel c : List.of(rdmaClient, tcpClient, rdmaServer, tcpServer)) {
                c.close().sync();
            }
        }
    }

    /** The transport's classes and Netty's, but not the epoll classes: as an application without them. */
    @Test
    void loadsAndAnswersIsCompatibleWithoutTheEpollClasses() throws Exception {
        URL[] urls = {
                RdmaIoHandler.class.getProtectionDomain().getCodeSource().getLocation(),
                io.netty.channel.IoHandler.class.getProtectionDomain().getCodeSource().getLocation(),
                io.netty.util.concurrent.EventExecutor.class.getProtectionDomain().getCodeSource().getLocation(),
                ByteBuf.class.getProtectionDomain().getCodeSource().getLocation(),
        };
        try (URLClassLoader loader = new URLClassLoader(urls, ClassLoader.getPlatformClassLoader())) {
            assertThatThrownBy(() -> loader.loadClass("io.netty.channel.epoll.EpollIoHandle"))
                    .isInstanceOf(ClassNotFoundException.class);
            Class.forName(RdmaIoHandler.class.getName(), true, loader);
            Class<?> watcher = Class.forName(FdWatcher.class.getName(), true, loader);
            var isCompatible = watcher.getDeclaredMethod("isCompatible", Class.class);
            isCompatible.setAccessible(true);
            Class<?> rdmaHandle = Class.forName(RdmaIoHandle.class.getName(), false, loader);
            Class<?> fdHandle = Class.forName(FdIoHandle.class.getName(), false, loader);
            assertThat(isCompatible.invoke(null, rdmaHandle)).isEqualTo(false);
            assertThat(isCompatible.invoke(null, fdHandle)).isEqualTo(true);
        }
    }
}

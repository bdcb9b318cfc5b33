package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import org.junit.jupiter.api.io.TempDir;

import java.net.ConnectException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.Map;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * An {@link RdmaChannel}'s TCP path: a client that falls back to TCP ({@link RdmaChannelOption#TCP_FALLBACK})
 * when nothing listens for RDMA, one that does not fall back from a reject of this transport's server, and a
 * dual-stack server ({@link RdmaChannelOption#TCP_LISTEN}) that serves an RDMA client and a NIO client on one port
 * number. Every echo is checked by CRC.
 */
@Timeout(60)
class RdmaTcpPathTest {
    private static final int ECHO_BYTES = 1 << 20;
    static EventLoopGroup group;
    static EventLoopGroup nio;

    @BeforeAll
    static void setUp() {
        SoftwareRdma.use();
        group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        nio = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    }

    @AfterAll
    static void tearDown() throws Exception {
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        nio.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }

    @BeforeEach
    void forget() {
        TcpFallback.forgetAll();
    }

    /** Writes back what it reads. */
    @Sharable
    static final class Echo extends ChannelInboundHandlerAdapter {
        final List<Channel> children = new CopyOnWriteArrayList<>();

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            children.add(ctx.channel());
            ctx.fireChannelActive();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }

    /** Sends {@code bytes} random bytes in fresh buffers of up to 16 KiB and completes with the echo's CRC. */
    static final class EchoClient extends ChannelInboundHandlerAdapter {
        final CompletableFuture<Long> echoed = new CompletableFuture<>();
        final long sentCrc;
        final byte[] data;
        final CRC32 crc = new CRC32();
        long received;

        EchoClient(int bytes, long seed) {
            data = new byte[bytes];
            new Random(seed).nextBytes(data);
            CRC32 c = new CRC32();
            c.update(data);
            sentCrc = c.getValue();
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            for (int off = 0; off < data.length; off += 16384) {
                int len = Math.min(16384, data.length - off);
                ctx.write(ctx.alloc().buffer(len).writeBytes(data, off, len));
            }
            ctx.flush();
            ctx.fireChannelActive();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            try {
                byte[] bytes = new byte[buf.readableBytes()];
                buf.readBytes(bytes);
                crc.update(bytes);
                received += bytes.length;
                if (received >= data.length) {
                    echoed.complete(crc.getValue());
                }
            } finally {
                buf.release();
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            echoed.completeExceptionally(cause);
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            echoed.completeExceptionally(new IllegalStateException("closed after " + received + " bytes"));
        }
    }

    private static Channel nioEchoServer() throws InterruptedException {
        return new ServerBootstrap().group(nio).channel(NioServerSocketChannel.class).childHandler(new Echo())
                .bind(TestAddress.get(), 0).sync().channel();
    }

    private static Bootstrap rdmaClient(EchoClient client, boolean fallback) {
        return new Bootstrap().group(group).channel(RdmaChannel.class)
                .option(RdmaChannelOption.TCP_FALLBACK, fallback)
                .handler(client);
    }

    private static RdmaChannel echoOver(Bootstrap b, EchoClient client, InetSocketAddress to) throws Exception {
        RdmaChannel ch = (RdmaChannel) b.connect(to).sync().channel();
        try {
            assertThat(client.echoed.get(30, TimeUnit.SECONDS)).as("CRC of the echo").isEqualTo(client.sentCrc);
        } finally {
            ch.close().sync();
        }
        return ch;
    }

    @Test
    void aClientFallsBackToAPlainTcpServerAndRemembersIt() throws Exception {
        Channel server = nioEchoServer();
        try {
            InetSocketAddress to = (InetSocketAddress) server.localAddress();
            long fallbacksBefore = fallbacks();
            EchoClient first = new EchoClient(ECHO_BYTES, 1);
            long t0 = System.nanoTime();
            RdmaChannel ch = echoOver(rdmaClient(first, true), first, to);
            long firstMillis = (System.nanoTime() - t0) / 1_000_000;
            assertThat(ch.isTcp()).isTrue();
            assertThat(ch.fallbackReason()).isNotNull().doesNotStartWith("remembered");
            assertThat(fallbacks()).isGreaterThan(fallbacksBefore);

            // The decision is remembered: no RDMA attempt, and the connect costs what a TCP connect costs.
            long connectNanos = Long.MAX_VALUE;
            for (int i = 0; i < 5; i++) {
                EchoClient again = new EchoClient(4096, 2 + i);
                long t1 = System.nanoTime();
                ChannelFuture f = rdmaClient(again, true).connect(to).sync();
                connectNanos = Math.min(connectNanos, System.nanoTime() - t1);
                RdmaChannel c = (RdmaChannel) f.channel();
                assertThat(again.echoed.get(30, TimeUnit.SECONDS)).isEqualTo(again.sentCrc);
                assertThat(c.isTcp()).isTrue();
                assertThat(c.fallbackReason()).startsWith("remembered: ");
                c.close().sync();
            }
            // What a client that knows only TCP pays for the same connect, in the same run.
            long nioNanos = Long.MAX_VALUE;
            for (int i = 0; i < 5; i++) {
                long t2 = System.nanoTime();
                Channel c = new Bootstrap().group(nio).channel(NioSocketChannel.class).handler(new Echo())
                        .connect(to).sync().channel();
                nioNanos = Math.min(nioNanos, System.nanoTime() - t2);
                c.close().sync();
            }
            System.out.printf("TCP fallback: first connect and 1 MiB echo %d ms (reason: %s); remembered connect"
                    + " %.2f ms, a NIO connect %.2f ms (best of 5 each): %.2f ms added%n", firstMillis,
                    ch.fallbackReason(), connectNanos / 1e6, nioNanos / 1e6, (connectNanos - nioNanos) / 1e6);
        } finally {
            server.close().sync();
        }
    }

    @Test
    void aClientFallsBackToAServerOnTheLoopbackAddress() throws Exception {
        // Kernel rdma_cm has no route over loopback (rdma_resolve_route fails with ENODEV in the rxe guest); the
        // software device takes it and finds no RDMA listener there. Either way RDMA cannot reach it.
        Channel server = new ServerBootstrap().group(nio).channel(NioServerSocketChannel.class)
                .childHandler(new Echo()).bind(java.net.InetAddress.getLoopbackAddress(), 0).sync().channel();
        try {
            EchoClient client = new EchoClient(65536, 8);
            RdmaChannel ch = echoOver(rdmaClient(client, true), client, (InetSocketAddress) server.localAddress());
            assertThat(ch.isTcp()).isTrue();
            assertThat(ch.fallbackReason()).isNotBlank();
        } finally {
            server.close().sync();
        }
    }

    @Test
    void withoutFallbackTheConnectFailsNamingTheReason() throws Exception {
        Channel server = nioEchoServer();
        try {
            EchoClient client = new EchoClient(1, 3);
            Bootstrap b = rdmaClient(client, false).option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 5000);
            assertThatThrownBy(() -> b.connect(server.localAddress()).sync())
                    .isInstanceOf(ConnectException.class)
                    .hasMessageContaining(String.valueOf(((InetSocketAddress) server.localAddress()).getPort()));
        } finally {
            server.close().sync();
        }
    }

    @Test
    void aRejectFromThisTransportsServerIsNotFallenBackFrom() throws Exception {
        Echo echo = new Echo();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .option(RdmaChannelOption.MAX_CONNECTIONS_PER_ADDRESS, 1)
                .childHandler(echo).bind(TestAddress.get(), 0).sync().channel();
        try {
            EchoClient holder = new EchoClient(1, 4);
            Channel held = rdmaClient(holder, true).connect(server.localAddress()).sync().channel();
            holder.echoed.get(10, TimeUnit.SECONDS);
            EchoClient refused = new EchoClient(1, 5);
            assertThatThrownBy(() -> rdmaClient(refused, true).connect(server.localAddress()).sync())
                    .isInstanceOf(ConnectException.class)
                    .hasMessageContaining("no resources");
            assertThat(TcpFallback.remembered((InetSocketAddress) server.localAddress())).isNull();
            held.close().sync();
        } finally {
            server.close().sync();
        }
    }

    @Test
    void aDualStackServerServesAnRdmaClientAndANioClientOnOnePort() throws Exception {
        Echo echo = new Echo();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .option(RdmaChannelOption.TCP_LISTEN, true)
                .childOption(RdmaChannelOption.RECEIVE_CREDITS, 32)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(echo);
                    }
                })
                .bind(TestAddress.get(), 0).sync().channel();
        try {
            InetSocketAddress at = (InetSocketAddress) server.localAddress();
            EchoClient overRdma = new EchoClient(ECHO_BYTES, 6);
            RdmaChannel rdma = echoOver(rdmaClient(overRdma, false), overRdma, at);
            assertThat(rdma.isTcp()).isFalse();

            EchoClient overTcp = new EchoClient(ECHO_BYTES, 7);
            Channel tcp = new Bootstrap().group(nio).channel(NioSocketChannel.class).handler(overTcp)
                    .connect(at).sync().channel();
            assertThat(overTcp.echoed.get(30, TimeUnit.SECONDS)).isEqualTo(overTcp.sentCrc);
            assertThat(((InetSocketAddress) tcp.remoteAddress()).getPort()).isEqualTo(at.getPort());
            tcp.close().sync();

            assertThat(echo.children).hasSize(2);
            assertThat(echo.children).allMatch(c -> c instanceof RdmaChannel);
            assertThat(((RdmaChannel) echo.children.get(0)).isTcp()).isFalse();
            RdmaChannel tcpChild = (RdmaChannel) echo.children.get(1);
            assertThat(tcpChild.isTcp()).isTrue();
            assertThat(tcpChild.parent()).isSameAs(server);
            assertThat(tcpChild.config().getReceiveCredits()).isEqualTo(32);
        } finally {
            server.close().sync();
        }
    }

    @Test
    void aHostWithoutAnRdmaDeviceConnectsAndServesOverTcp() throws Exception {
        // The system's rdma-core: on a machine without RDMA (ours; the software device is not the system's) it finds
        // no device. Where it finds one (kernel rxe in the guest), there is no host without a device to try.
        Map<String, String> probe = probeWithoutRdma(null);
        org.junit.jupiter.api.Assumptions.assumeTrue("false".equals(probe.get("available")),
                "the system's rdma-core finds an RDMA device on this machine");
        assertWithoutRdma(probe, "no RDMA device");
    }

    @Test
    @Timeout(240) // a fresh JVM under the rxe guest's emulation, on a loaded host, took more than 60 s
    void aHostWithoutTheRdmaLibrariesConnectsAndServesOverTcp(@TempDir Path empty) throws Exception {
        Map<String, String> probe = probeWithoutRdma(empty.toString());
        assertWithoutRdma(probe, "cannot load the RDMA libraries");
    }

    private static void assertWithoutRdma(Map<String, String> probe, String cause) {
        assertThat(probe).containsKeys("clientEcho", "serverEcho");
        assertThat(probe.get("requiredFactory")).startsWith("failed to load the RDMA transport").contains(cause);
        assertThat(probe.get("clientEcho")).isEqualTo("true");
        assertThat(probe.get("clientTcp")).isEqualTo("true");
        assertThat(probe.get("clientReason")).startsWith("no RDMA on this host: ").contains(cause);
        assertThat(probe.get("withoutFallback")).contains("no RDMA on this host").contains(cause);
        assertThat(probe.get("serverEcho")).isEqualTo("true");
        assertThat(probe.get("serverChildTcp")).isEqualTo("true");
    }

    /** Runs {@link WithoutRdmaProbe} in a fresh JVM with the system's libraries, or those of {@code libraryPath}. */
    private static Map<String, String> probeWithoutRdma(String libraryPath) throws Exception {
        String classPath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", classPath));
        if (libraryPath != null) {
            command.add("-D" + NativeLibraries.LIBRARY_PATH_PROPERTY + "=" + libraryPath);
        }
        command.add(WithoutRdmaProbe.class.getName());
        Path log = Files.createTempFile("without-rdma-probe", ".log");
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(log.toFile());
        builder.environment().remove(NativeLibraries.LIBRARY_PATH_ENV);
        Process process = builder.start();
        boolean exited = process.waitFor(200, TimeUnit.SECONDS);
        if (!exited) {
            process.destroyForcibly();
        }
        String output = Files.readString(log, StandardCharsets.UTF_8);
        Files.deleteIfExists(log);
        assertThat(exited).as("the probe exited within 200 s; its output so far:%n%s", output).isTrue();
        assertThat(process.exitValue()).as("probe output:%n%s", output).isZero();
        Map<String, String> values = new LinkedHashMap<>();
        for (String line : output.split("\\R")) {
            int eq = line.indexOf('=');
            if (eq > 0 && line.substring(0, eq).matches("[A-Za-z]+")) {
                values.put(line.substring(0, eq), line.substring(eq + 1));
            }
        }
        assertThat(values).as("probe output:%n%s", output).containsKeys("available");
        return values;
    }

    private static long fallbacks() {
        long n = 0;
        for (var loop : group) {
            n += RdmaIoHandler.metric(loop).tcpFallbacks();
        }
        return n;
    }
}

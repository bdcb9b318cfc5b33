package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The fabric's options reach the queue pairs: a client and a server each set their own, and what
 * {@code ibv_query_qp} reports on both ends is what rdma_cm's negotiation makes of them (the client's traffic
 * class and retry count on both, each side's RNR retry count on its peer's queue pair, each side's own ACK
 * timeout and minimum RNR timer); the JFR Connect and Accept events carry the same; a device or GID type pinned
 * to something else fails the connect naming the remedy. Runs on the software device and on kernel rxe
 * (testsuite/rxe-vm).
 */
@Timeout(60)
class RdmaFabricOptionsTest {
    private static EventLoopGroup group;

    @BeforeAll
    static void setUp() {
        SoftwareRdma.use();
        group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
    }

    @AfterAll
    static void tearDown() throws InterruptedException {
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }

    @Test
    void eachOptionIsWhatBothQueuePairsReport(@TempDir Path dir) throws Exception {
        BlockingQueue<RdmaChannel> accepted = new ArrayBlockingQueue<>(1);
        Path file = dir.resolve("fabric.jfr");
        RdmaConnectionSettings client;
        RdmaConnectionSettings server;
        try (Recording recording = new Recording()) {
            recording.enable("io.netty.contrib.rdma.Connect");
            recording.enable("io.netty.contrib.rdma.Accept");
            recording.start();
            Channel listener = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childOption(RdmaChannelOption.ACK_TIMEOUT, 16)
                    .childOption(RdmaChannelOption.RETRY_COUNT, 2)
                    .childOption(RdmaChannelOption.RNR_RETRY_COUNT, 4)
                    .childOption(RdmaChannelOption.MIN_RNR_TIMER, 12)
                    .childOption(ChannelOption.IP_TOS, 8)
                    .childHandler(new Echo(accepted))
                    .bind(TestAddress.get(), 0).sync().channel();
            BlockingQueue<String> replies = new ArrayBlockingQueue<>(1);
            Channel ch = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(ChannelOption.IP_TOS, 104) // DSCP 26 (AF31)
                    .option(RdmaChannelOption.ACK_TIMEOUT, 18)
                    .option(RdmaChannelOption.RETRY_COUNT, 5)
                    .option(RdmaChannelOption.RNR_RETRY_COUNT, 3)
                    .option(RdmaChannelOption.MIN_RNR_TIMER, 20)
                    .handler(new Collect(replies))
                    .connect(listener.localAddress()).sync().channel();
            ch.writeAndFlush(Unpooled.copiedBuffer("fabric", StandardCharsets.US_ASCII)).sync();
            assertThat(replies.poll(10, TimeUnit.SECONDS)).as("the echo over the configured QPs").isEqualTo("fabric");
            RdmaChannel child = accepted.poll(10, TimeUnit.SECONDS);
            assertThat(child).isNotNull();
            client = ((RdmaChannel) ch).connectionSettings();
            server = child.connectionSettings();
            ch.close().sync();
            listener.close().sync();
            recording.stop();
            recording.dump(file);
        }
        System.out.println("client: " + client);
        System.out.println("server: " + server);
        // the connect request carries the client's path: its traffic class on both ends, the server's ignored
        assertThat(client.trafficClass()).isEqualTo(104);
        assertThat(client.dscp()).isEqualTo(26);
        assertThat(server.trafficClass()).isEqualTo(104);
        // ACK timeout: local
        assertThat(client.ackTimeout()).isEqualTo(18);
        assertThat(server.ackTimeout()).isEqualTo(16);
        assertThat(client.ackTimeoutMicros()).isEqualTo(4.096 * (1 << 18));
        // retry count: the client's, on both; RNR retry count: each side's on its peer's queue pair
        assertThat(client.retryCount()).isEqualTo(5);
        assertThat(server.retryCount()).isEqualTo(5);
        assertThat(client.rnrRetryCount()).isEqualTo(4);
        assertThat(server.rnrRetryCount()).isEqualTo(3);
        // minimum RNR timer: the responder's own
        assertThat(client.minRnrTimer()).isEqualTo(20);
        assertThat(client.minRnrTimerMillis()).isEqualTo(10.24);
        assertThat(server.minRnrTimer()).isEqualTo(12);
        for (RdmaConnectionSettings s : List.of(client, server)) {
            assertThat(s.device()).isNotEmpty();
            assertThat(s.port()).isEqualTo(1);
            assertThat(s.pathMtu()).isIn(256, 512, 1024, 2048, 4096);
            assertThat(s.gidType()).isIn(RdmaChannelConfig.GID_TYPES);
        }

        List<RecordedEvent> events = RecordingFile.readAllEvents(file);
        RecordedEvent connect = only(events, "Connect");
        RecordedEvent accept = only(events, "Accept");
        assertThat(connect.getInt("trafficClass")).isEqualTo(104);
        assertThat(connect.getInt("ackTimeout")).isEqualTo(18);
        assertThat(connect.getInt("retryCount")).isEqualTo(5);
        assertThat(connect.getInt("rnrRetryCount")).isEqualTo(4);
        assertThat(connect.getInt("minRnrTimer")).isEqualTo(20);
        assertThat(connect.getString("device")).isEqualTo(client.device());
        assertThat(connect.getString("gidType")).isEqualTo(client.gidType());
        assertThat(connect.getInt("pathMtu")).isEqualTo(client.pathMtu());
        assertThat(accept.getInt("trafficClass")).isEqualTo(104);
        assertThat(accept.getInt("ackTimeout")).isEqualTo(16);
        assertThat(accept.getInt("retryCount")).isEqualTo(5);
        assertThat(accept.getInt("rnrRetryCount")).isEqualTo(3);
        assertThat(accept.getInt("minRnrTimer")).isEqualTo(12);
        assertThat(accept.getInt("gidIndex")).isEqualTo(server.gidIndex());
    }

    @Test
    void withoutOptionsRdmaCmDecides() throws Exception {
        RdmaConnectionSettings[] both = connect(new Bootstrap());
        for (RdmaConnectionSettings s : both) {
            assertThat(s.trafficClass()).isZero();
            assertThat(s.retryCount()).isEqualTo(RdmaChannelConfig.DEFAULT_RETRY_COUNT);
            assertThat(s.rnrRetryCount()).isEqualTo(RdmaChannelConfig.DEFAULT_RNR_RETRY_COUNT);
            assertThat(s.ackTimeout()).isBetween(0, 31);
        }
        // rdma_cm's minimum RNR timer for user-space QPs (Linux's ib_cm: 0, 655.36 ms)
        assertThat(both[0].minRnrTimer()).isZero();
        assertThat(both[1].minRnrTimer()).isZero();
    }

    @Test
    void aPinnedDeviceOrGidTypeThatMatchesConnects() throws Exception {
        RdmaConnectionSettings chosen = connect(new Bootstrap())[0];
        RdmaConnectionSettings pinned = connect(new Bootstrap()
                .option(RdmaChannelOption.DEVICE, chosen.device())
                .option(RdmaChannelOption.GID_TYPE, chosen.gidType()))[0];
        assertThat(pinned.device()).isEqualTo(chosen.device());
        assertThat(pinned.gidType()).isEqualTo(chosen.gidType());
    }

    @Test
    void aPinnedDeviceOrGidTypeThatDoesNotMatchFailsNamingTheRemedy() throws Exception {
        RdmaConnectionSettings chosen = connect(new Bootstrap())[0];
        Channel listener = listen(new ArrayBlockingQueue<>(4));
        try {
            ChannelFuture device = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(RdmaChannelOption.DEVICE, "nosuchdevice0").handler(new ChannelInboundHandlerAdapter())
                    .connect(listener.localAddress()).await();
            assertThat(device.isSuccess()).isFalse();
            assertThat(device.cause()).hasMessageContaining("on device " + chosen.device())
                    .hasMessageContaining("not on nosuchdevice0").hasMessageContaining("bind the channel");
            String other = RdmaChannelConfig.GID_TYPES.stream().filter(t -> !t.equals(chosen.gidType()))
                    .findFirst().orElseThrow();
            ChannelFuture gid = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(RdmaChannelOption.GID_TYPE, other).handler(new ChannelInboundHandlerAdapter())
                    .connect(listener.localAddress()).await();
            assertThat(gid.isSuccess()).isFalse();
            assertThat(gid.cause()).hasMessageContaining("got a " + chosen.gidType() + " GID")
                    .hasMessageContaining("not " + other).hasMessageContaining("default_roce_mode");
            assertThat(gid.channel().closeFuture().await(5, TimeUnit.SECONDS)).as("the failed channel closes").isTrue();
        } finally {
            listener.close().sync();
        }
    }

    @Test
    void serviceLevelAndPathMtuCapOnBothQueuePairsWithBigMessagesIntact(@TempDir Path dir) throws Exception {
        // below what rdma_cm chooses (kernel rxe: the netdev's MTU), so the cap shows
        int path = connect(new Bootstrap())[0].pathMtu();
        int cap = Math.min(1024, path / 2);
        BlockingQueue<RdmaChannel> accepted = new ArrayBlockingQueue<>(1);
        Path file = dir.resolve("sl.jfr");
        RdmaConnectionSettings client;
        RdmaConnectionSettings server;
        try (Recording recording = new Recording()) {
            recording.enable("io.netty.contrib.rdma.Connect");
            recording.enable("io.netty.contrib.rdma.Accept");
            recording.start();
            // the server sets only its SL: its queue pair follows the client's cap, negotiated in the parameters
            Channel listener = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childOption(RdmaChannelOption.SERVICE_LEVEL, 3)
                    .childOption(RdmaChannelOption.MIN_RNR_TIMER, 12)
                    .childHandler(new Echo(accepted))
                    .bind(TestAddress.get(), 0).sync().channel();
            BlockingQueue<ByteBuf> replies = new ArrayBlockingQueue<>(64);
            Channel ch = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(RdmaChannelOption.SERVICE_LEVEL, 3)
                    .option(RdmaChannelOption.PATH_MTU, cap)
                    .option(RdmaChannelOption.ACK_TIMEOUT, 18)
                    .option(RdmaChannelOption.MIN_RNR_TIMER, 20)
                    .handler(new Keep(replies))
                    .connect(listener.localAddress()).sync().channel();
            RdmaChannel child = accepted.poll(10, TimeUnit.SECONDS);
            assertThat(child).isNotNull();
            client = ((RdmaChannel) ch).connectionSettings();
            server = child.connectionSettings();
            // across the MTU: one byte, one packet's worth and one more, many packets, and past the receive ring
            byte[] sent = new byte[4 << 20];
            new java.util.Random(42).nextBytes(sent);
            int[] sizes = {1, cap, cap + 1, 64 * cap + 7, 1 << 20, 2 << 20};
            int offset = 0;
            for (int size : sizes) {
                ch.write(Unpooled.wrappedBuffer(sent, offset, size));
                offset += size;
            }
            ch.flush();
            byte[] got = new byte[offset];
            int received = 0;
            while (received < offset) {
                ByteBuf buf = replies.poll(20, TimeUnit.SECONDS);
                assertThat(buf).as("echo after " + received + " of " + offset + " bytes").isNotNull();
                int n = buf.readableBytes();
                assertThat(received + n).isLessThanOrEqualTo(offset);
                buf.readBytes(got, received, n);
                buf.release();
                received += n;
            }
            assertThat(java.util.Arrays.equals(got, 0, offset, sent, 0, offset)).as("echoed bytes intact").isTrue();
            ch.close().sync();
            listener.close().sync();
            recording.stop();
            recording.dump(file);
        }
        System.out.println("path MTU " + path + ", cap " + cap);
        System.out.println("client: " + client);
        System.out.println("server: " + server);
        int sl = keepsServiceLevel(client.device()) ? 3 : 0;
        for (RdmaConnectionSettings s : List.of(client, server)) {
            assertThat(s.pathMtu()).as("path MTU").isEqualTo(cap);
            assertThat(s.serviceLevel()).as("service level").isEqualTo(sl);
        }
        // the rest as on rdma_cm's own queue pairs
        assertThat(client.ackTimeout()).isEqualTo(18);
        assertThat(client.minRnrTimer()).isEqualTo(20);
        assertThat(server.minRnrTimer()).isEqualTo(12);
        assertThat(client.retryCount()).isEqualTo(RdmaChannelConfig.DEFAULT_RETRY_COUNT);
        assertThat(server.rnrRetryCount()).isEqualTo(RdmaChannelConfig.DEFAULT_RNR_RETRY_COUNT);
        List<RecordedEvent> events = RecordingFile.readAllEvents(file);
        RecordedEvent connect = only(events, "Connect");
        RecordedEvent accept = only(events, "Accept");
        assertThat(connect.getInt("serviceLevel")).isEqualTo(sl);
        assertThat(connect.getInt("pathMtu")).isEqualTo(cap);
        assertThat(accept.getInt("serviceLevel")).isEqualTo(sl);
        assertThat(accept.getInt("pathMtu")).isEqualTo(cap);
    }

    @Test
    void aClientWithItsOwnQueuePairTakesTheServersCap() throws Exception {
        int path = connect(new Bootstrap())[0].pathMtu();
        int cap = Math.min(1024, path / 2);
        BlockingQueue<RdmaChannel> accepted = new ArrayBlockingQueue<>(1);
        Channel listener = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childOption(RdmaChannelOption.PATH_MTU, cap)
                .childHandler(new Echo(accepted))
                .bind(TestAddress.get(), 0).sync().channel();
        try {
            // a cap above the server's: the smaller wins on both
            Channel ch = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(RdmaChannelOption.PATH_MTU, 2 * cap)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(listener.localAddress()).sync().channel();
            RdmaChannel child = accepted.poll(10, TimeUnit.SECONDS);
            assertThat(child).isNotNull();
            assertThat(((RdmaChannel) ch).connectionSettings().pathMtu()).isEqualTo(cap);
            assertThat(child.connectionSettings().pathMtu()).isEqualTo(cap);
            ch.close().sync();
        } finally {
            listener.close().sync();
        }
    }

    @Test
    void aServerCapThatAClientOfRdmaCmsQueuePairCannotFollowIsRefusedNamingTheRemedy() throws Exception {
        int path = connect(new Bootstrap())[0].pathMtu();
        int cap = path / 2;
        Channel listener = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childOption(RdmaChannelOption.PATH_MTU, cap)
                .childHandler(new Echo(new ArrayBlockingQueue<>(4)))
                .bind(TestAddress.get(), 0).sync().channel();
        try {
            ChannelFuture f = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(listener.localAddress()).await();
            assertThat(f.isSuccess()).isFalse();
            assertThat(f.cause()).hasMessageContaining("caps the path MTU")
                    .hasMessageContaining("RdmaChannelOption.PATH_MTU");
        } finally {
            listener.close().sync();
        }
    }

    @Test
    void aServersServiceLevelIsItsOwnBesideAClientOfRdmaCmsQueuePair() throws Exception {
        BlockingQueue<RdmaChannel> accepted = new ArrayBlockingQueue<>(1);
        Channel listener = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childOption(RdmaChannelOption.SERVICE_LEVEL, 5)
                .childHandler(new Echo(accepted))
                .bind(TestAddress.get(), 0).sync().channel();
        try {
            BlockingQueue<String> replies = new ArrayBlockingQueue<>(1);
            Channel ch = new Bootstrap().group(group).channel(RdmaChannel.class).handler(new Collect(replies))
                    .connect(listener.localAddress()).sync().channel();
            ch.writeAndFlush(Unpooled.copiedBuffer("sl", StandardCharsets.US_ASCII)).sync();
            assertThat(replies.poll(10, TimeUnit.SECONDS)).isEqualTo("sl");
            RdmaChannel child = accepted.poll(10, TimeUnit.SECONDS);
            assertThat(child).isNotNull();
            RdmaConnectionSettings client = ((RdmaChannel) ch).connectionSettings();
            RdmaConnectionSettings server = child.connectionSettings();
            assertThat(server.serviceLevel()).isEqualTo(keepsServiceLevel(server.device()) ? 5 : 0);
            assertThat(client.serviceLevel()).as("rdma_cm's, from the traffic class 0").isZero();
            assertThat(server.pathMtu()).isEqualTo(client.pathMtu());
            ch.close().sync();
        } finally {
            listener.close().sync();
        }
    }

    @Test
    void invalidServiceLevelsAndPathMtusAreRefusedWhenSet() {
        RdmaChannelConfig config = new RdmaChannel().config();
        for (int sl : new int[] {-2, 16, 255}) {
            assertThatThrownBy(() -> config.setOption(RdmaChannelOption.SERVICE_LEVEL, sl))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("serviceLevel: " + sl).hasMessageContaining("0-15");
        }
        for (int mtu : new int[] {-1, 1, 1000, 1500, 8192, 9000}) {
            assertThatThrownBy(() -> config.setOption(RdmaChannelOption.PATH_MTU, mtu))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("pathMtu: " + mtu).hasMessageContaining("256, 512, 1024, 2048 or 4096");
        }
        assertThat(config.getOption(RdmaChannelOption.SERVICE_LEVEL)).isEqualTo(-1);
        assertThat(config.getOption(RdmaChannelOption.PATH_MTU)).isZero();
        assertThat(config.setOption(RdmaChannelOption.SERVICE_LEVEL, 15)).isTrue();
        assertThat(config.setOption(RdmaChannelOption.PATH_MTU, 256)).isTrue();
        assertThat(config.getOptions()).containsEntry(RdmaChannelOption.SERVICE_LEVEL, 15)
                .containsEntry(RdmaChannelOption.PATH_MTU, 256);
    }

    /**
     * Whether {@code ibv_query_qp} reports the SL a queue pair was given: kernel rxe keeps only the address
     * vector's GRH (its {@code rxe_av_from_attr}), so it reports 0; an rxe device names its netdev in sysfs
     * ({@code parent}), which hardware devices do not.
     */
    static boolean keepsServiceLevel(String device) {
        return !java.nio.file.Files.exists(java.nio.file.Path.of("/sys/class/infiniband", device, "parent"));
    }

    /** Connects with {@code bootstrap}'s options; the client's and the accepted channel's settings. */
    private static RdmaConnectionSettings[] connect(Bootstrap bootstrap) throws Exception {
        BlockingQueue<RdmaChannel> accepted = new ArrayBlockingQueue<>(1);
        Channel listener = listen(accepted);
        try {
            Channel ch = bootstrap.group(group).channel(RdmaChannel.class).handler(new ChannelInboundHandlerAdapter())
                    .connect(listener.localAddress()).sync().channel();
            RdmaChannel child = accepted.poll(10, TimeUnit.SECONDS);
            assertThat(child).isNotNull();
            RdmaConnectionSettings[] both = {((RdmaChannel) ch).connectionSettings(), child.connectionSettings()};
            ch.close().sync();
            return both;
        } finally {
            listener.close().sync();
        }
    }

    private static Channel listen(BlockingQueue<RdmaChannel> accepted) throws InterruptedException {
        return new ServerBootstrap().group(group).channel(RdmaServerChannel.class).childHandler(new Echo(accepted))
                .bind(TestAddress.get(), 0).sync().channel();
    }

    private static RecordedEvent only(List<RecordedEvent> events, String name) {
        List<RecordedEvent> found = events.stream()
                .filter(e -> e.getEventType().getName().equals("io.netty.contrib.rdma." + name)).toList();
        assertThat(found).as(name + " events").hasSize(1);
        return found.get(0);
    }

    private static final class Echo extends ChannelInboundHandlerAdapter {
        private final BlockingQueue<RdmaChannel> accepted;

        Echo(BlockingQueue<RdmaChannel> accepted) {
            this.accepted = accepted;
        }

        @Override
        public boolean isSharable() {
            return true;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            accepted.add((RdmaChannel) ctx.channel());
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.writeAndFlush(msg);
        }
    }

    private static final class Keep extends ChannelInboundHandlerAdapter {
        private final BlockingQueue<ByteBuf> replies;

        Keep(BlockingQueue<ByteBuf> replies) {
            this.replies = replies;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            replies.add((ByteBuf) msg);
        }
    }

    private static final class Collect extends ChannelInboundHandlerAdapter {
        private final BlockingQueue<String> replies;

        Collect(BlockingQueue<String> replies) {
            this.replies = replies;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            replies.add(buf.toString(StandardCharsets.US_ASCII));
            buf.release();
        }
    }
}

package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The receive rings of one loop's connections together stay within {@link RdmaIoHandlerConfig#ringMemory}, however
 * many connections stream large messages at once: later connections get smaller rings or none (their large
 * messages go as SENDs), and every byte still arrives.
 */
@Timeout(120)
class RdmaRingMemoryTest {
    private static final int MIB = 1 << 20;

    private EventLoopGroup serverGroup;
    private EventLoopGroup clientGroup;

    @BeforeAll
    static void software() {
        SoftwareRdma.use();
    }

    @AfterEach
    void shutdown() throws Exception {
        if (clientGroup != null) {
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        if (serverGroup != null) {
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void connectionsStreamingAtOnceShareTheLoopsRingMemory() throws Exception {
        long limit = 2L * MIB;
        int connections = 6;
        int total = 16 * MIB;
        Map<Channel, CompletableFuture<Long>> received = new ConcurrentHashMap<>();
        serverGroup = new MultiThreadIoEventLoopGroup(1,
                RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().ringMemory(limit)));
        clientGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        Channel server = server(received, total);
        byte[] message = RdmaReceiveRingTest.random(MIB, 1);
        CRC32 expected = new CRC32();
        for (int i = 0; i < total / MIB; i++) {
            expected.update(message);
        }
        List<Channel> clients = new ArrayList<>();
        for (int i = 0; i < connections; i++) {
            clients.add(new Bootstrap().group(clientGroup).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel());
        }
        // The server's loop is the one its children are on (one loop).
        RdmaIoHandlerMetric loop = RdmaIoHandler.metric(server.eventLoop());
        for (Channel c : clients) {
            for (int sent = 0; sent < total; sent += MIB) {
                c.write(Unpooled.wrappedBuffer(message));
            }
            c.flush();
        }
        long most = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (received.size() < connections || !received.values().stream().allMatch(CompletableFuture::isDone)) {
            most = Math.max(most, loop.ringMemory());
            assertThat(System.nanoTime()).as("all %d streams received (%s)", connections, received)
                    .isLessThan(deadline);
            Thread.sleep(1);
        }
        for (CompletableFuture<Long> crc : received.values()) {
            assertThat(crc.get()).isEqualTo(expected.getValue());
        }
        long offered = 0;
        for (Channel child : received.keySet()) {
            offered += ((RdmaChannel) child).metric().ringsOffered();
        }
        assertThat(most).as("ring memory pinned at most").isPositive().isLessThanOrEqualTo(limit);
        assertThat(offered).as("rings offered").isPositive();
        for (Channel c : clients) {
            c.close().sync();
        }
        awaitRingMemory(loop, 0);
        server.close().sync();
    }

    @Test
    void noRingMemoryMeansNoRingsAndLargeMessagesGoAsSends() throws Exception {
        Map<Channel, CompletableFuture<Long>> received = new ConcurrentHashMap<>();
        serverGroup = new MultiThreadIoEventLoopGroup(1,
                RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().ringMemory(0)));
        clientGroup = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        Channel server = server(received, 4 * MIB);
        byte[] message = RdmaReceiveRingTest.random(4 * MIB, 2);
        CRC32 expected = new CRC32();
        expected.update(message);
        Channel client = new Bootstrap().group(clientGroup).channel(RdmaChannel.class)
                .handler(new ChannelInboundHandlerAdapter())
                .connect(server.localAddress()).sync().channel();
        client.writeAndFlush(Unpooled.wrappedBuffer(message)).sync();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (received.isEmpty() || !received.values().iterator().next().isDone()) {
            assertThat(System.nanoTime()).as("the message received").isLessThan(deadline);
            Thread.sleep(1);
        }
        Map.Entry<Channel, CompletableFuture<Long>> child = received.entrySet().iterator().next();
        assertThat(child.getValue().get()).isEqualTo(expected.getValue());
        assertThat(((RdmaChannel) child.getKey()).metric().ringsOffered()).isZero();
        assertThat(((RdmaChannel) client).metric().ringWrites()).isZero();
        assertThat(RdmaIoHandler.metric(server.eventLoop()).ringMemory()).isZero();
        client.close().sync();
        server.close().sync();
    }

    /** A server whose children each complete their future with the CRC of what they read once it is {@code total}. */
    private Channel server(Map<Channel, CompletableFuture<Long>> received, long total) throws InterruptedException {
        return new ServerBootstrap().group(serverGroup).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        CompletableFuture<Long> done = new CompletableFuture<>();
                        received.put(ch, done);
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            final CRC32 sum = new CRC32();
                            long bytes;

                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ByteBuf buf = (ByteBuf) msg;
                                bytes += buf.readableBytes();
                                sum.update(buf.nioBuffer());
                                buf.release();
                                if (bytes == total) {
                                    done.complete(sum.getValue());
                                }
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
    }

    private static void awaitRingMemory(RdmaIoHandlerMetric loop, long expected) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (loop.ringMemory() != expected && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertThat(loop.ringMemory()).as("ring memory pinned").isEqualTo(expected);
    }
}

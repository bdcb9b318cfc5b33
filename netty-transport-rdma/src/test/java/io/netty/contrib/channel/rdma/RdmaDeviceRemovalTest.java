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
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import io.netty.util.concurrent.EventExecutor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A device removed under running loops ({@code RDMA_CM_EVENT_DEVICE_REMOVAL}: {@code rdma link delete}, a driver
 * reset, a hot-unplugged NIC): every channel on it closes with the removal as its cause, a listener bound to one of
 * its addresses closes, a buffer the application holds stays intact, and every object the process made on the device
 * (queue pairs, queues, completion channels, memory regions, the protection domain) is freed, so that librdmacm can
 * close the device's context and the kernel can finish the removal (kernel rxe blocks `rdma link delete` until then:
 * the {@code device-delete} row of {@code testsuite/rxe-vm}'s fault matrix). The software device cannot be removed,
 * so the removal is reported here as an rdma_cm id reports it ({@link RdmaDevices#removed}); the loops then find the
 * device again, as they would a device added back.
 */
@Timeout(60)
class RdmaDeviceRemovalTest {
    static {
        SoftwareRdma.use();
    }

    private static final String CAUSE = "was removed (RDMA_CM_EVENT_DEVICE_REMOVAL)";
    private static final List<String> DEVICE_OBJECTS = List.of("pd", "mr", "cq", "comp_channel", "qp", "srq");

    @Test
    void aRemovedDeviceClosesWhatIsOnItAndFreesEveryObjectMadeThere() throws Exception {
        boolean counted = SoftwareRdma.hasObjectCounts();
        Map<String, Long> before = counted ? SoftwareRdma.objectCounts() : null;
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        VerbsContext context = VerbsContext.cmDevices().getFirst();
        boolean removed = false;
        try {
            CompletableFuture<Throwable> childCause = new CompletableFuture<>();
            CompletableFuture<Channel> accepted = new CompletableFuture<>();
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            accepted.complete(ch);
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    ctx.writeAndFlush(msg);
                                }

                                @Override
                                public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                    childCause.complete(cause);
                                }
                            });
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            CompletableFuture<ByteBuf> echoed = new CompletableFuture<>();
            CompletableFuture<Throwable> clientCause = new CompletableFuture<>();
            Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            // Held past the removal.
                            echoed.complete((ByteBuf) msg);
                        }

                        @Override
                        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                            clientCause.complete(cause);
                        }
                    }).connect((InetSocketAddress) server.localAddress()).sync().channel();
            byte[] sent = new byte[1000];
            for (int i = 0; i < sent.length; i++) {
                sent[i] = (byte) (i * 31);
            }
            client.writeAndFlush(Unpooled.wrappedBuffer(sent)).sync();
            ByteBuf held = echoed.get(10, TimeUnit.SECONDS);
            Channel child = accepted.get(10, TimeUnit.SECONDS);

            RdmaDevices.Device device = RdmaDevices.of(context);
            removed = true;
            assertThat(RdmaDevices.removed(context)).contains(CAUSE);

            assertThat(client.closeFuture().await(10, TimeUnit.SECONDS)).as("the client closed").isTrue();
            assertThat(child.closeFuture().await(10, TimeUnit.SECONDS)).as("the server's child closed").isTrue();
            assertThat(server.closeFuture().await(10, TimeUnit.SECONDS)).as("the listener on the device's address"
                    + " closed").isTrue();
            assertThat(clientCause.get(10, TimeUnit.SECONDS)).hasMessageContaining(CAUSE);
            assertThat(childCause.get(10, TimeUnit.SECONDS)).hasMessageContaining(CAUSE);

            waitFor(() -> RdmaDevices.released(context), "the removed device released");
            assertThat(device.pd().isOpen()).as("the removed device's protection domain is open").isFalse();
            assertThat(device.allocator().metric().registeredMemory()).as("registered by the removed device's"
                    + " allocator").isZero();
            byte[] read = new byte[held.readableBytes()];
            held.getBytes(held.readerIndex(), read);
            assertThat(read).as("the buffer held over the removal").isEqualTo(sent);
            held.release();
            for (EventExecutor loop : group) {
                RdmaIoHandlerMetric metric = RdmaIoHandler.metric(loop);
                assertThat(metric.queueGroups()).as("queue groups of %s", loop).isZero();
                assertThat(metric.queuePairs()).as("queue pairs of %s", loop).isZero();
            }
            if (counted) {
                for (String kind : DEVICE_OBJECTS) {
                    waitFor(() -> SoftwareRdma.objectCounts().get(kind).equals(before.get(kind)),
                            kind + " back to " + before.get(kind) + " (" + SoftwareRdma.objectCounts() + ")");
                }
            }

            // Nothing is made on the removed device again while librdmacm may still list it.
            assertThatThrownBy(() -> RdmaDevices.of(context)).hasMessageContaining("was removed");
            // The loops go on with the device found again (here the same one, said to be back, as a device added
            // again would be once librdmacm lists it).
            RdmaDevices.addedBack(context);
            removed = false;
            assertThat(echo(group)).isEqualTo(100);
        } finally {
            if (removed) {
                // The software device still has it: back for the tests after this one in the JVM.
                waitFor(() -> RdmaDevices.released(context), "the removed device released");
                RdmaDevices.addedBack(context);
            }
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    /** A new server and client, one 100-byte echo; returns the bytes echoed. */
    private static int echo(EventLoopGroup group) throws Exception {
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ctx.writeAndFlush(msg);
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        CompletableFuture<Integer> echoed = new CompletableFuture<>();
        Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                .handler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        echoed.complete(((ByteBuf) msg).readableBytes());
                        ((ByteBuf) msg).release();
                    }
                }).connect((InetSocketAddress) server.localAddress()).sync().channel();
        try {
            client.writeAndFlush(Unpooled.wrappedBuffer(new byte[100])).sync();
            return echoed.get(10, TimeUnit.SECONDS);
        } finally {
            client.close().sync();
            server.close().sync();
        }
    }

    static void waitFor(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("not within 10 s: " + what);
            }
            Thread.sleep(10);
        }
    }
}

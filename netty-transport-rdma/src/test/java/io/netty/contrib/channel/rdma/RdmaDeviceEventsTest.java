package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.IbvEventType;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What a loop does with the device events that are not one queue pair's: a completion queue or shared receive queue
 * that failed closes every channel of its queue group, a failed device every channel on it, each with the event as
 * its cause (the transport never overruns its queues, so the events are handed to the owning loop here as
 * {@link DeviceEvents} hands them over; the queue pair events come from the device itself in
 * {@code RdmaHostilePeerTest} and {@code HostilePeerProcessTest}).
 */
@Timeout(60)
class RdmaDeviceEventsTest {
    static {
        SoftwareRdma.use();
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(ints = {IbvEventType.CQ_ERR, IbvEventType.SRQ_ERR, IbvEventType.DEVICE_FATAL})
    void queueAndDeviceErrorsCloseTheirChannelsWithTheEventAsCause(int type) throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        CompletableFuture<RdmaChannel> accepted = new CompletableFuture<>();
        CompletableFuture<Throwable> cause = new CompletableFuture<>();
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelActive(ChannelHandlerContext ctx) {
                                    accepted.complete((RdmaChannel) ctx.channel());
                                }

                                @Override
                                public void exceptionCaught(ChannelHandlerContext ctx, Throwable t) {
                                    cause.complete(t);
                                    ctx.close();
                                }
                            });
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect((InetSocketAddress) server.localAddress()).sync().channel();
            RdmaChannel child = accepted.get(10, TimeUnit.SECONDS);
            RdmaIoHandler.Registration r = child.registration;
            child.eventLoop().submit(() -> {
                if (type == IbvEventType.DEVICE_FATAL) {
                    // The software device is the only one: rdma_cm's contexts are the ones the connections use.
                    r.handler().deviceEvent(VerbsContext.cmDevices().getFirst().address(), type);
                } else {
                    r.handler().queueEvent(r.group, type);
                }
            }).sync();

            assertThat(cause.get(10, TimeUnit.SECONDS)).hasMessageContaining(IbvEventType.name(type));
            assertThat(child.closeFuture().await(10, TimeUnit.SECONDS)).as("the server's channel closed").isTrue();
            // Both ends share the loop, so its group and device: the client's channel closes as well.
            assertThat(client.closeFuture().await(10, TimeUnit.SECONDS)).as("the client's channel closed").isTrue();

            // The loop goes on: a new connection gets a new queue pair and can send.
            Channel again = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect((InetSocketAddress) server.localAddress()).sync().channel();
            again.writeAndFlush(Unpooled.wrappedBuffer(new byte[64])).sync();
            again.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void srqLimitIsNotAnError() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInboundHandlerAdapter()).bind(TestAddress.get(), 0).sync().channel();
            RdmaChannel client = (RdmaChannel) new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect((InetSocketAddress) server.localAddress()).sync().channel();
            RdmaIoHandler.Registration r = client.registration;
            client.eventLoop().submit(() -> r.handler().queueEvent(r.group, IbvEventType.SRQ_LIMIT_REACHED)).sync();
            assertThat(client.closeFuture().await(200, TimeUnit.MILLISECONDS)).as("closed by SRQ_LIMIT_REACHED").isFalse();
            assertThat(client.isActive()).isTrue();
            client.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }
}

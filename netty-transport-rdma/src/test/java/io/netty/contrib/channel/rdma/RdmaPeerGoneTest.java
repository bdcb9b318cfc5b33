package io.netty.contrib.channel.rdma;

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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A peer that leaves while this side's send queue holds work the device never finishes (here a SEND the peer
 * answers with RNR NAKs forever, as kernel rxe's stalled requester left a LOCAL_INV in the fault matrix,
 * docs/faults.md): the channel closes at once, and a ring write that arrived before the peer left, whose slab's
 * invalidation waited behind that SEND, is delivered first.
 */
@Timeout(60)
class RdmaPeerGoneTest {
    static {
        SoftwareRdma.use();
    }

    @Test
    void peerThatLeavesBehindAStuckSendQueueClosesTheChannelAfterDelivery() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        CompletableFuture<Channel> accepted = new CompletableFuture<>();
        AtomicLong read = new AtomicLong();
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelActive(ChannelHandlerContext ctx) {
                                    accepted.complete(ctx.channel());
                                }

                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    read.addAndGet(((ByteBuf) msg).readableBytes());
                                    ((ByteBuf) msg).release();
                                }
                            });
                        }
                    })
                    .bind(TestAddress.get(), 0).sync().channel();
            RdmaIoHandlerMetric loop = RdmaIoHandler.metric(server.eventLoop());
            try (RawPeer peer = new RawPeer((InetSocketAddress) server.localAddress(), 64)) {
                Channel child = accepted.get(10, TimeUnit.SECONDS);
                peer.awaitRing();
                long before = read.get();
                // More SENDs than the peer has receives left (the RING took one): the last ones get RNR NAKs.
                for (int i = 0; i < 2 * RawPeer.SLOTS; i++) {
                    child.writeAndFlush(Unpooled.wrappedBuffer(new byte[16])).sync();
                }
                Thread.sleep(200);
                // Lands (the responder takes it), but its slab's invalidation completes only after those SENDs.
                assertThat(peer.ringWriteAtStart(1000)).isEqualTo("SUCCESS");
                Thread.sleep(200);
                assertThat(read.get() - before).as("delivered before the peer left: the invalidation waits").isZero();

                peer.disconnect();
                assertThat(child.closeFuture().await(5, TimeUnit.SECONDS))
                        .as("the channel closed after its peer left").isTrue();
                assertThat(read.get() - before).as("the ring write that arrived before the peer left").isEqualTo(1000);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
                while (loop.queuePairs() != 0 && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                assertThat(loop.queuePairs()).as("queue pairs after the close").isZero();
            }
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }
}

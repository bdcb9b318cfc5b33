package io.netty.contrib.channel.rdma.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.DuplexChannel;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.AbstractSocketShutdownOutputByPeerTest;

import java.net.SocketAddress;
import java.util.List;

/**
 * Netty's shutdown-output-by-peer test with an RDMA peer: the abstract class lets each transport supply the
 * "socket" that connects, writes and shuts down its output (Netty's {@code SocketShutdownOutputByPeerTest} uses a
 * {@code java.net.Socket}, which cannot reach an RDMA server); here it is an {@link RdmaChannel}.
 */
class RdmaShutdownOutputByPeerTest extends AbstractSocketShutdownOutputByPeerTest<RdmaShutdownOutputByPeerTest.Peer> {
    /** The peer's channel, created on connect. */
    static final class Peer {
        Channel channel;
    }

    @Override
    protected List<BootstrapFactory<ServerBootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.server();
    }

    @Override
    protected Peer newSocket() {
        return new Peer();
    }

    @Override
    protected void connect(Peer peer, SocketAddress address) {
        peer.channel = new Bootstrap().group(RdmaSocketTestPermutation.INSTANCE.clientGroup)
                .channel(RdmaChannel.class).handler(new ChannelInboundHandlerAdapter())
                .connect(address).syncUninterruptibly().channel();
    }

    @Override
    protected void write(Peer peer, int data) {
        peer.channel.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {(byte) data})).syncUninterruptibly();
    }

    @Override
    protected void shutdownOutput(Peer peer) {
        ((DuplexChannel) peer.channel).shutdownOutput().syncUninterruptibly();
    }

    @Override
    protected void close(Peer peer) {
        if (peer.channel != null) {
            peer.channel.close().syncUninterruptibly();
        }
    }
}

package io.netty.contrib.channel.rdma;

import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoop;
import io.netty.channel.epoll.EpollServerSocketChannel;

import java.net.InetSocketAddress;

/**
 * The TCP listener of a dual-stack {@link RdmaServerChannel} ({@link RdmaChannelOption#TCP_LISTEN}): Netty's own
 * {@link EpollServerSocketChannel}, hidden behind the server channel on its loop and bound to the same address and
 * port number (RDMA ports are a space of their own, as on InfiniBand and RoCE). Each socket it accepts becomes an
 * {@link RdmaChannel} on its {@link TcpPath}, handed up the server's pipeline like an RDMA connection, so one
 * {@code ServerBootstrap} and one child handler serve both kinds of client. Loop-thread confined; links against
 * netty-transport-classes-epoll, as {@link TcpPath} does.
 */
final class TcpListener {
    private final RdmaServerChannel owner;
    private final EpollServerSocketChannel socket = new EpollServerSocketChannel();

    TcpListener(RdmaServerChannel owner, int backlog) {
        this.owner = owner;
        socket.config().setBacklog(backlog);
        socket.config().setReuseAddress(true);
        socket.pipeline().addLast(new Acceptor());
    }

    /** Registers on {@code loop} and binds to {@code address}; the future fails with what bind failed with. */
    ChannelFuture bind(EventLoop loop, InetSocketAddress address) {
        ChannelFuture registered = loop.register(socket);
        if (!registered.isSuccess()) {
            return registered;
        }
        return socket.bind(address);
    }

    InetSocketAddress localAddress() {
        return socket.localAddress();
    }

    void close() {
        socket.close();
    }

    @Override
    public String toString() {
        return "TcpListener(" + socket.localAddress() + ")";
    }

    private final class Acceptor extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            owner.tcpAccepted((Channel) msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            owner.tcpAcceptedAll();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            owner.tcpAcceptFailed(cause);
        }
    }
}

package io.netty.contrib.channel.rdma.testsuite.epoll;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollDatagramChannel;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.socket.SocketProtocolFamily;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketTestPermutation;
import io.netty.util.concurrent.DefaultThreadFactory;

import java.util.List;

/**
 * Netty's socket and datagram testsuite with Netty's own epoll channels ({@link EpollServerSocketChannel},
 * {@link EpollSocketChannel}, {@link EpollDatagramChannel}) registered on {@link RdmaIoHandler} loops, as Netty's
 * {@code EpollSocketTestPermutation} runs them on epoll loops. Sockets: both ends epoll channels on RDMA loops.
 * Datagrams: every pair of an epoll channel on an RDMA loop and an NIO channel, but NIO with NIO, as Netty does.
 */
final class EpollOnRdmaSocketTestPermutation extends SocketTestPermutation {
    static final EpollOnRdmaSocketTestPermutation INSTANCE = new EpollOnRdmaSocketTestPermutation();

    private final EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(2,
            new DefaultThreadFactory("testsuite-epoll-on-rdma-server", true), RdmaIoHandler.newFactory());
    private final EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(2,
            new DefaultThreadFactory("testsuite-epoll-on-rdma-client", true), RdmaIoHandler.newFactory());

    private EpollOnRdmaSocketTestPermutation() {
    }

    @Override
    public List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> socket() {
        return combo(serverSocket(), clientSocket());
    }

    @Override
    public List<BootstrapFactory<ServerBootstrap>> serverSocket() {
        return List.of(() -> new ServerBootstrap().group(serverGroup).channel(EpollServerSocketChannel.class));
    }

    @Override
    public List<BootstrapFactory<Bootstrap>> clientSocket() {
        return List.of(() -> new Bootstrap().group(clientGroup).channel(EpollSocketChannel.class));
    }

    @Override
    public List<BootstrapComboFactory<Bootstrap, Bootstrap>> datagram(SocketProtocolFamily family) {
        List<BootstrapFactory<Bootstrap>> factories = List.of(
                () -> new Bootstrap().group(NIO_GROUP).channelFactory(() -> new NioDatagramChannel(family)),
                () -> new Bootstrap().group(clientGroup).channelFactory(() -> new EpollDatagramChannel(family)));
        List<BootstrapComboFactory<Bootstrap, Bootstrap>> combos = combo(factories, factories);
        return combos.subList(1, combos.size()); // the first is NIO with NIO
    }

    @Override
    public List<BootstrapFactory<Bootstrap>> datagramSocket() {
        return List.of(() -> new Bootstrap().group(clientGroup).channel(EpollDatagramChannel.class));
    }
}

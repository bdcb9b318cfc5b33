package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;

import java.net.InetAddress;
import java.util.concurrent.TimeUnit;

/**
 * Run in a fresh JVM where RDMA is unavailable by {@link RdmaTcpPathTest}: loops started with
 * {@code requireRdma(false)} carry a falling-back client and a dual-stack server over TCP, and say why not RDMA.
 * Prints {@code key=value} lines.
 */
public final class WithoutRdmaProbe {
    private WithoutRdmaProbe() {
    }

    public static void main(String[] args) throws Exception {
        System.out.println("available=" + Rdma.isAvailable());
        if (Rdma.isAvailable()) {
            return; // a host with RDMA: nothing to try here
        }
        try {
            RdmaIoHandler.newFactory();
            System.out.println("requiredFactory=created");
        } catch (UnsatisfiedLinkError e) {
            System.out.println("requiredFactory=" + e.getMessage());
        }
        InetAddress localhost = InetAddress.getLoopbackAddress();
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1,
                RdmaIoHandler.newFactory(new RdmaIoHandlerConfig().requireRdma(false)));
        EventLoopGroup nio = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
        try {
            Channel nioServer = new ServerBootstrap().group(nio).channel(NioServerSocketChannel.class)
                    .childHandler(new RdmaTcpPathTest.Echo()).bind(localhost, 0).sync().channel();
            RdmaTcpPathTest.EchoClient client = new RdmaTcpPathTest.EchoClient(65536, 11);
            RdmaChannel ch = (RdmaChannel) new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(RdmaChannelOption.TCP_FALLBACK, true).handler(client)
                    .connect(nioServer.localAddress()).sync().channel();
            System.out.println("clientEcho=" + (client.echoed.get(30, TimeUnit.SECONDS) == client.sentCrc));
            System.out.println("clientTcp=" + ch.isTcp());
            System.out.println("clientReason=" + ch.fallbackReason());
            ch.close().sync();

            try {
                new Bootstrap().group(group).channel(RdmaChannel.class).handler(new RdmaTcpPathTest.Echo())
                        .connect(nioServer.localAddress()).sync();
                System.out.println("withoutFallback=connected");
            } catch (Exception e) {
                System.out.println("withoutFallback=" + e.getMessage());
            }
            nioServer.close().sync();

            RdmaTcpPathTest.Echo echo = new RdmaTcpPathTest.Echo();
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .option(RdmaChannelOption.TCP_LISTEN, true).childHandler(echo).bind(localhost, 0).sync()
                    .channel();
            RdmaTcpPathTest.EchoClient nioClient = new RdmaTcpPathTest.EchoClient(65536, 12);
            Channel c = new Bootstrap().group(nio).channel(NioSocketChannel.class).handler(nioClient)
                    .connect(server.localAddress()).sync().channel();
            System.out.println("serverEcho=" + (nioClient.echoed.get(30, TimeUnit.SECONDS) == nioClient.sentCrc));
            System.out.println("serverChildTcp=" + ((RdmaChannel) echo.children.get(0)).isTcp());
            c.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            nio.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }
}

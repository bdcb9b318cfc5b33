package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import io.netty.contrib.channel.rdma.testsuite.TestAddress;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/**
 * The server half of the cross-process echo tests, run in its own JVM ({@code EchoServerProcess [ADDRESS]},
 * 127.0.0.1 by default): echoes every connection, prints {@code PORT <n>} once listening, and shuts down cleanly
 * (exit code 0) when its standard input closes.
 */
public final class EchoServerProcess {
    private EchoServerProcess() {
    }

    public static void main(String[] args) throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    ctx.write(msg);
                                }

                                @Override
                                public void channelReadComplete(ChannelHandlerContext ctx) {
                                    ctx.flush();
                                }
                            });
                        }
                    }).bind(args.length > 0 ? args[0] : TestAddress.host(), 0).sync().channel();
            System.out.println("PORT " + ((java.net.InetSocketAddress) server.localAddress()).getPort());
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            while (in.readLine() != null) {
                // wait for the parent to close our standard input
            }
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        System.out.println("STOPPED");
    }
}

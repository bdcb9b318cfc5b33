package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;

import java.net.InetSocketAddress;

/**
 * Run by {@link RdmaKeepAliveTest} in a JVM of its own: connects to {@code args[0]}:{@code args[1]}, prints
 * {@code CONNECTED} and then sends nothing (its retry count, which rdma_cm gives both queue pairs, is 1), until it is killed (or stopped, which is the point).
 */
public final class KeepAlivePeer {
    private KeepAlivePeer() {
    }

    public static void main(String[] args) throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        new Bootstrap().group(group).channel(RdmaChannel.class)
                .option(RdmaChannelOption.RETRY_COUNT, 1).handler(new ChannelInboundHandlerAdapter())
                .connect(new InetSocketAddress(args[0], Integer.parseInt(args[1]))).sync();
        System.out.println("CONNECTED");
        Thread.sleep(Long.MAX_VALUE);
    }
}

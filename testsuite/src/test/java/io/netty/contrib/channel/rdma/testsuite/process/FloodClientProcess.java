package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.testsuite.TestAddress;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;

/**
 * The flood of {@link FloodRecoveryTest}: opens {@code args[1]} connections to port {@code args[0]} in waves of
 * 200, sends one 64-byte message on each (so every connection has used the server's receive slots), prints
 * {@code CONNECTED <n> <millis>}, then waits to be killed.
 */
public final class FloodClientProcess {
    private static final int WAVE = 200;

    private FloodClientProcess() {
    }

    public static void main(String[] args) throws Exception {
        try {
            flood(args);
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1); // the loops' threads would keep the JVM alive
        }
    }

    private static void flood(String[] args) throws Exception {
        InetSocketAddress address = new InetSocketAddress(TestAddress.get(), Integer.parseInt(args[0]));
        int count = Integer.parseInt(args[1]);
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        Bootstrap bootstrap = new Bootstrap().group(group).channel(RdmaChannel.class)
                .handler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ((ByteBuf) msg).release(); // the echo
                            }
                        });
                    }
                });
        List<Channel> channels = new ArrayList<>();
        long start = System.nanoTime();
        for (int done = 0; done < count; done += WAVE) {
            List<ChannelFuture> wave = new ArrayList<>();
            for (int i = done; i < Math.min(count, done + WAVE); i++) {
                wave.add(bootstrap.connect(address));
            }
            for (ChannelFuture f : wave) {
                Channel c = f.sync().channel();
                c.writeAndFlush(c.alloc().directBuffer(64).writeZero(64));
                channels.add(c);
            }
        }
        System.out.println("CONNECTED " + channels.size() + " " + (System.nanoTime() - start) / 1_000_000);
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}

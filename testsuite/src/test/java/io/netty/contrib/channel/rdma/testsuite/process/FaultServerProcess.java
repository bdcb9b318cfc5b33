package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaChannelOption;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaIoHandlerMetric;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import io.netty.util.concurrent.GlobalEventExecutor;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The server of the fault matrix (testsuite/rxe-vm/faults.sh), one JVM for every row:
 * {@code FaultServerProcess ADDRESS PORT ACK_TIMEOUT}. Echoes every connection, with {@code ACK_TIMEOUT} on its
 * accepted channels (its own sends' retry timer; the retry count is the client's), and the system property
 * {@code fault.ringSize} as their {@code RING_SIZE} when set (0: no receive rings, large messages by SEND), and a gRPC
 * echo service ({@link FaultGrpc}) on another port of the address. Prints {@code GRPC-PORT <n>}, then {@code PORT <n>}
 * once listening. Commands on standard input, one a line, each answered with one line:
 * {@code stats} → {@code STATS channels=<open children> accepted=<n> closed=<n> qps=<queue pairs of the loop>
 * groups=<queue groups>}, then a {@code CHILD-STATE <remote> <connection>} line per open child (what it holds); end of input shuts down and prints {@code STOPPED}. Every child that closes is
 * logged as {@code CHILD-CLOSED <remote> <cause or clean>}. A listener closed under it (its device removed) is bound
 * again until that succeeds ({@code LISTENER-CLOSED}, {@code LISTENING-AGAIN}).
 */
public final class FaultServerProcess {
    private FaultServerProcess() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: FaultServerProcess ADDRESS PORT ACK_TIMEOUT");
            System.exit(2);
        }
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        ChannelGroup children = new DefaultChannelGroup(GlobalEventExecutor.INSTANCE);
        AtomicLong accepted = new AtomicLong();
        AtomicLong closed = new AtomicLong();
        try {
            ServerBootstrap sb = new ServerBootstrap();
            Integer ringSize = Integer.getInteger(FaultClientProcess.RING_SIZE_PROPERTY);
            if (ringSize != null) {
                sb.childOption(RdmaChannelOption.RING_SIZE, ringSize);
            }
            sb.group(group).channel(RdmaServerChannel.class)
                    .childOption(RdmaChannelOption.ACK_TIMEOUT, Integer.parseInt(args[2]))
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            accepted.incrementAndGet();
                            children.add(ch);
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                private Throwable cause;

                                @Override
                                public void channelActive(ChannelHandlerContext ctx) {
                                    println("CHILD-OPEN " + ctx.channel().remoteAddress() + " "
                                            + (ctx.channel() instanceof RdmaChannel r ? r.connectionSettings()
                                                    : ctx.channel().getClass().getSimpleName()));
                                    ctx.fireChannelActive();
                                }

                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    ctx.write(msg);
                                }

                                @Override
                                public void channelReadComplete(ChannelHandlerContext ctx) {
                                    ctx.flush();
                                }

                                @Override
                                public void exceptionCaught(ChannelHandlerContext ctx, Throwable t) {
                                    cause = t;
                                    ctx.close();
                                }

                                @Override
                                public void channelInactive(ChannelHandlerContext ctx) {
                                    closed.incrementAndGet();
                                    println("CHILD-CLOSED " + ctx.channel().remoteAddress() + " "
                                            + (cause == null ? "clean" : FaultClientProcess.describe(cause)));
                                }
                            });
                        }
                    });
            Channel first = sb.bind(args[0], Integer.parseInt(args[1])).sync().channel();
            int port = ((InetSocketAddress) first.localAddress()).getPort();
            server.set(first);
            ackTimeout = Integer.parseInt(args[2]);
            grpc.set(FaultGrpc.server(new InetSocketAddress(args[0], 0), group, ackTimeout));
            grpcAddress = new InetSocketAddress(args[0], grpc.get().getPort());
            listenAgainWhenClosed(sb, new InetSocketAddress(args[0], port), first, group);
            println("GRPC-PORT " + grpcAddress.getPort());
            println("PORT " + port);
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.trim().equals("stats")) {
                    RdmaIoHandlerMetric m = RdmaIoHandler.metric(group.next());
                    println("STATS channels=" + children.size() + " accepted=" + accepted.get() + " closed="
                            + closed.get() + " qps=" + m.queuePairs() + " groups=" + m.queueGroups()
                            + " server=" + (server.get().isActive() ? "listening" : "closed"));
                    for (Channel child : children) {
                        println("CHILD-STATE " + child.remoteAddress() + " "
                                + FaultClientProcess.connectionState(child));
                    }
                }
            }
            stopping = true;
            server.get().close().sync();
            grpc.get().shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        println("STOPPED");
    }

    private static final AtomicReference<Channel> server = new AtomicReference<>();
    private static volatile boolean stopping;
    private static final AtomicReference<io.grpc.Server> grpc = new AtomicReference<>();
    private static volatile InetSocketAddress grpcAddress;
    private static volatile int ackTimeout;

    /**
     * A listener closed under the server (its address's device was removed: the device-delete row) is bound again,
     * every half second, as a server that must keep serving would: once the device is back it listens again on the
     * same port ({@code LISTENER-CLOSED}, then {@code LISTENING-AGAIN after <ms> ms}).
     */
    private static void listenAgainWhenClosed(ServerBootstrap sb, InetSocketAddress address, Channel listener,
                                              EventLoopGroup group) {
        listener.closeFuture().addListener(f -> {
            if (!stopping) {
                println("LISTENER-CLOSED " + address);
                // The gRPC server's listener was on the same device: it is started again with the echo's.
                grpc.get().shutdownNow();
                bindAgain(sb, address, System.nanoTime(), group);
            }
        });
    }

    private static void bindAgain(ServerBootstrap sb, InetSocketAddress address, long since, EventLoopGroup group) {
        GlobalEventExecutor.INSTANCE.schedule(() -> sb.bind(address).addListener((ChannelFuture f) -> {
            if (stopping) {
                f.channel().close();
            } else if (f.isSuccess()) {
                server.set(f.channel());
                println("LISTENING-AGAIN after " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - since) + " ms");
                listenAgainWhenClosed(sb, address, f.channel(), group);
                // Not on the loop this listener runs on: gRPC's start waits for its bind there.
                GlobalEventExecutor.INSTANCE.execute(() -> startGrpcAgain(group, since));
            } else {
                bindAgain(sb, address, since, group);
            }
        }), 500, TimeUnit.MILLISECONDS);
    }

    private static void startGrpcAgain(EventLoopGroup group, long since) {
        if (stopping) {
            return;
        }
        try {
            grpc.set(FaultGrpc.server(grpcAddress, group, ackTimeout));
            println("GRPC-LISTENING-AGAIN after " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - since) + " ms");
        } catch (IOException | RuntimeException e) {
            println("GRPC-START-FAILED " + FaultClientProcess.describe(e));
            GlobalEventExecutor.INSTANCE.schedule(() -> startGrpcAgain(group, since), 500, TimeUnit.MILLISECONDS);
        }
    }

    static synchronized void println(String line) {
        System.out.println(line);
        System.out.flush();
    }
}

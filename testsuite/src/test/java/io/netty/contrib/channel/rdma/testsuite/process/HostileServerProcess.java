package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.RdmaByteBufAllocator;
import io.netty.contrib.channel.rdma.RdmaChannelOption;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import io.netty.contrib.channel.rdma.testsuite.TestAddress;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The server of {@link HostilePeerProcessTest}, in its own JVM so that its software-device objects can be counted
 * alone: an echo server on one loop with {@link RdmaChannelOption#ESTABLISH_TIMEOUT_MILLIS} from its first argument.
 * It prints {@code PORT <n>}, then one line per event of an accepted connection, named by the peer's port:
 * {@code CHILD <port>} (connection request accepted), {@code ACTIVE <port>}, {@code EXCEPTION <port> <class>:
 * <message>} and {@code CLOSED <port>}; each {@code STATUS} line on standard input is answered with {@code STATUS
 * children=<accepted, not closed> chunks=<registered pool chunks> <kind>=<count>...}; when its standard input closes it shuts down and prints
 * {@code FINAL <kind>=<count>...}.
 *
 * <p>A connection whose first message starts with {@link #HOLD} is not read for {@value #HOLD_MILLIS} ms after
 * it: what the peer writes meanwhile stays where it landed (the cross-connection scenario checks that nobody else
 * can change it there).
 */
public final class HostileServerProcess {
    static final byte[] HOLD = {'H', 'O', 'L', 'D', 0, 'R', 'D', 'M'};
    static final long HOLD_MILLIS = 800;
    /**
     * A connection whose first message starts with this keeps the next buffer it reads for {@value #HOLD_MILLIS}
     * ms, then prints {@code HELD <port> crc=<crc32 of its bytes> zeroCopy=<whether it lies over the ring>}.
     */
    static final byte[] KEEP = {'K', 'E', 'E', 'P', 0, 'R', 'D', 'M'};

    private HostileServerProcess() {
    }

    public static void main(String[] args) throws Throwable {
        // Every refusal logged: the test reads the reason of each (servers log one per 10 s by default).
        System.setProperty("io.netty.contrib.rdma.refusalLogIntervalMillis", "0");
        int establishTimeout = Integer.parseInt(args[0]);
        AtomicInteger children = new AtomicInteger();
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childOption(RdmaChannelOption.ESTABLISH_TIMEOUT_MILLIS, establishTimeout)
                .handler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        Channel child = (Channel) msg;
                        String port = port(child.remoteAddress());
                        children.incrementAndGet();
                        print("CHILD " + port);
                        child.closeFuture().addListener(f -> {
                            children.decrementAndGet();
                            print("CLOSED " + port);
                        });
                        ctx.fireChannelRead(msg);
                    }
                })
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new Echo());
                    }
                }).bind(TestAddress.host(), 0).sync().channel();
        print("PORT " + ((InetSocketAddress) server.localAddress()).getPort());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.equals("STATUS")) {
                print("STATUS children=" + children.get() + " chunks="
                        + RdmaByteBufAllocator.defaultAllocator().metric().chunkCount() + ConnectionsServerProcess.counts());
            }
        }
        server.close().sync();
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        print("FINAL" + ConnectionsServerProcess.counts());
    }

    private static final class Echo extends ChannelInboundHandlerAdapter {
        private boolean first = true;
        private boolean keepNext;

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            print("ACTIVE " + port(ctx.channel().remoteAddress()));
            ctx.fireChannelActive();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            if (keepNext) {
                keepNext = false;
                long zeroCopyBefore = ((io.netty.contrib.channel.rdma.RdmaChannel) ctx.channel()).metric()
                        .zeroCopyBuffers();
                String port = port(ctx.channel().remoteAddress());
                ctx.executor().schedule(() -> {
                    java.util.zip.CRC32 crc = new java.util.zip.CRC32();
                    crc.update(buf.nioBuffer());
                    boolean overRing = zeroCopyBefore > 0;
                    print("HELD " + port + " crc=" + String.format("%08x", crc.getValue()) + " zeroCopy=" + overRing);
                    buf.release();
                }, HOLD_MILLIS, TimeUnit.MILLISECONDS);
                return;
            }
            if (first) {
                first = false;
                if (buf.readableBytes() >= KEEP.length
                        && ByteBufUtil.equals(buf, buf.readerIndex(), io.netty.buffer.Unpooled.wrappedBuffer(KEEP), 0,
                        KEEP.length)) {
                    keepNext = true;
                }
                if (buf.readableBytes() >= HOLD.length
                        && ByteBufUtil.equals(buf, buf.readerIndex(), io.netty.buffer.Unpooled.wrappedBuffer(HOLD), 0,
                        HOLD.length)) {
                    ctx.channel().config().setAutoRead(false);
                    ctx.executor().schedule(() -> {
                        ctx.channel().config().setAutoRead(true);
                    }, HOLD_MILLIS, TimeUnit.MILLISECONDS);
                }
            }
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            print("EXCEPTION " + port(ctx.channel().remoteAddress()) + " " + cause.getClass().getName() + ": "
                    + cause.getMessage());
            ctx.close();
        }
    }

    private static String port(SocketAddress address) {
        return address instanceof InetSocketAddress a ? String.valueOf(a.getPort()) : "-1";
    }

    private static synchronized void print(String line) {
        System.out.println(line);
        System.out.flush();
    }
}

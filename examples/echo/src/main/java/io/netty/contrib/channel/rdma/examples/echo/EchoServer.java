package io.netty.contrib.channel.rdma.examples.echo;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.contrib.channel.rdma.RdmaChannelOption;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;

import java.util.Locale;

/**
 * Echoes back whatever a client sends, over RDMA. The same code as Netty's echo server but for the two lines
 * that pick the transport ({@link Options#ioHandlerFactory()} and {@link Options#serverChannelClass()}: with
 * {@code --transport epoll} the same server runs over TCP, for comparison).
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp ... EchoServer [--address 0.0.0.0] [--port 7474] [--busy-poll]
 *      [--transport rdma|epoll|nio] [--tcp-listen]
 * </pre>
 */
public final class EchoServer {
    private EchoServer() {
    }

    public static void main(String[] args) throws Exception {
        Options options = Options.parse(args);
        options.selectDevice();
        Channel channel = start(options);
        System.err.println("echo server listening on " + channel.localAddress() + " ("
                + options.transport.name().toLowerCase(Locale.ROOT) + (options.tcpListen ? " and tcp" : "") + ")");
        channel.closeFuture().sync();
    }

    /** Starts a server; closing the returned channel's event loops is up to the caller (see closeFuture). */
    static Channel start(Options options) throws InterruptedException {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(options.threads, options.ioHandlerFactory());
        ServerBootstrap b = new ServerBootstrap()
                .group(group)
                .channel(options.serverChannelClass())
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(EchoServerHandler.INSTANCE);
                    }
                });
        if (options.tcpListen) {
            b.option(RdmaChannelOption.TCP_LISTEN, true);
        }
        Channel channel = b.bind(options.address, options.port).sync().channel();
        channel.closeFuture().addListener(f -> group.shutdownGracefully());
        return channel;
    }

    @Sharable
    static final class EchoServerHandler extends ChannelInboundHandlerAdapter {
        static final EchoServerHandler INSTANCE = new EchoServerHandler();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            cause.printStackTrace();
            ctx.close();
        }
    }
}

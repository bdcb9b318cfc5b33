package io.netty.contrib.channel.rdma.microbench.harness;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.RdmaChannelOption;
import io.netty.handler.codec.ByteToMessageDecoder;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The server JVM of one transport's run: an echo port (everything read is written back), a sink port (reads a
 * stream announced by an 8-byte length and answers one byte when all of it has arrived) and a control port, a
 * plain TCP socket outside the event loops that answers {@code stats} with the loop threads' allocated bytes
 * and CPU time and the process's CPU time. Prints {@code ready ECHO_PORT SINK_PORT CONTROL_PORT} on stdout and
 * runs until its standard input closes.
 *
 * <pre>
 * BenchServer --transport rdma|rdma-busy-poll|epoll|nio [--threads 1]
 * </pre>
 */
public final class BenchServer {
    private BenchServer() {
    }

    public static void main(String[] args) throws Exception {
        Transport transport = null;
        int threads = 1;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--transport" -> transport = Transport.of(args[++i]);
                case "--threads" -> threads = Integer.parseInt(args[++i]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (transport == null) {
            throw new IllegalArgumentException("--transport is required");
        }
        // Results go to stdout; keep anything else (library warnings) off it.
        PrintStream out = System.out;
        System.setOut(System.err);

        InetAddress loopback = InetAddress.getLoopbackAddress();
        LoopThreads loopThreads = new LoopThreads("server-loop");
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(threads, loopThreads, transport.ioHandlerFactory());
        try (ServerSocket control = new ServerSocket(0, 4, loopback)) {
            Channel echo = bind(group, transport, loopback, new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    ch.pipeline().addLast(EchoHandler.INSTANCE);
                }
            });
            Channel sink = bind(group, transport, loopback, new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    SinkHandler.addTo(ch.pipeline());
                }
            });
            Thread controlThread = new Thread(() -> serveControl(control, loopThreads), "control");
            controlThread.setDaemon(true);
            controlThread.start();
            out.println("ready " + port(echo) + " " + port(sink) + " " + control.getLocalPort());
            out.flush();
            // Until the harness closes our stdin (or dies).
            while (System.in.read() >= 0) {
                // ignore input
            }
            echo.close().sync();
            sink.close().sync();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    private static Channel bind(EventLoopGroup group, Transport transport, InetAddress address,
                                ChannelInitializer<SocketChannel> init) throws InterruptedException {
        ServerBootstrap b = new ServerBootstrap().group(group).channel(transport.serverChannel()).childHandler(init);
        // -Dbench.ringSize=BYTES: the RING_SIZE the server's channels offer (docs/benchmarks/rings.md).
        Integer ring = Integer.getInteger("bench.ringSize");
        if (ring != null && transport.rdma()) {
            b.childOption(RdmaChannelOption.RING_SIZE, ring);
        }
        return b
                .bind(new InetSocketAddress(address, 0)).sync().channel();
    }

    private static int port(Channel ch) {
        return ((InetSocketAddress) ch.localAddress()).getPort();
    }

    private static void serveControl(ServerSocket control, LoopThreads loopThreads) {
        while (!control.isClosed()) {
            try (Socket s = control.accept();
                 BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(),
                         StandardCharsets.US_ASCII));
                 PrintWriter w = new PrintWriter(s.getOutputStream(), true, StandardCharsets.US_ASCII)) {
                String line;
                while ((line = in.readLine()) != null) {
                    w.println("stats".equals(line) ? loopThreads.statsLine() : "unknown command " + line);
                }
            } catch (IOException e) {
                if (!control.isClosed()) {
                    System.err.println("control connection: " + e);
                }
            }
        }
    }

    /** Writes back what it reads; no promise per write, so the handler itself allocates nothing. */
    @Sharable
    static final class EchoHandler extends ChannelInboundHandlerAdapter {
        static final EchoHandler INSTANCE = new EchoHandler();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg, ctx.voidPromise());
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            System.err.println("echo connection failed: " + cause);
            ctx.close();
        }
    }

    /** Reads an 8-byte length, then that many bytes, then answers one byte; again and again. */
    /**
     * The sink of a stream: reads its {@link SinkHeader}, then counts the bytes announced and acknowledges them with
     * one byte. A sequenced stream is framed as applications frame theirs, a decoder handing each message on as its
     * own buffer, whose sequence number {@link #checkSequence} checks (the next handler of {@link #addTo}).
     */
    static final class SinkHandler extends ByteToMessageDecoder {
        private final SinkHeader header = new SinkHeader();
        private long remaining;
        private int messageSize;

        /** Adds a sink and the handler that checks a sequenced stream's messages to {@code pipeline}. */
        static void addTo(io.netty.channel.ChannelPipeline pipeline) {
            pipeline.addLast(new SinkHandler(), new SequenceChecker());
        }

        @Override
        protected void decode(ChannelHandlerContext ctx, ByteBuf in, List<Object> out) {
            while (in.isReadable()) {
                if (remaining == 0) {
                    if (header.read(in)) {
                        remaining = header.bytes();
                        messageSize = (int) header.messageSize();
                        out.add(SequenceChecker.RESTART);
                    }
                    continue;
                }
                if (messageSize > 0) {
                    if (in.readableBytes() < messageSize) {
                        return;
                    }
                    out.add(in.readRetainedSlice(messageSize));
                    remaining -= messageSize;
                } else {
                    int n = (int) Math.min(remaining, in.readableBytes());
                    in.skipBytes(n);
                    remaining -= n;
                }
                if (remaining == 0) {
                    ctx.writeAndFlush(ctx.alloc().directBuffer(1).writeByte(1), ctx.voidPromise());
                }
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            System.err.println("sink connection failed: " + cause);
            ctx.close();
        }

    /** Checks that a sequenced stream's messages carry 0, 1, 2, ... in their first 8 bytes; releases each. */
    static final class SequenceChecker extends ChannelInboundHandlerAdapter {
        /** From the sink: a new stream starts, numbered from 0 again. */
        static final Object RESTART = new Object();
        private long expected;

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (msg == RESTART) {
                expected = 0;
                return;
            }
            ByteBuf message = (ByteBuf) msg;
            try {
                long number = message.getLong(message.readerIndex());
                if (number != expected) {
                    throw new IllegalStateException("message " + expected + " carries sequence number " + number);
                }
                expected++;
            } finally {
                message.release();
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            System.err.println("sink connection failed: " + cause);
            ctx.close();
        }
    }
    }
}

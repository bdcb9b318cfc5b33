package io.netty.contrib.channel.rdma.testsuite.process;

import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.testsuite.TestAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Server in one JVM, client in another (this one), on the software RDMA device across processes (its TCP wire) or
 * on the device the library path chose: messages across the SEND / ring-write boundary echoed and checked by CRC,
 * then a clean shutdown on both sides; and a server killed outright, which the client's channel must notice.
 */
@Timeout(180)
class TwoProcessEchoTest {
    @Test
    void echoAcrossTwoJvms() throws Exception {
        ServerProcess server = ServerProcess.start();
        try {
            echo(server.port);

            server.process.getOutputStream().close();
            assertThat(server.process.waitFor(60, TimeUnit.SECONDS)).as("server process exits").isTrue();
            assertThat(server.process.exitValue()).isZero();
            server.reader.join(10_000);
            assertThat(server.lines).as("the server's output after shutdown").contains("STOPPED");
        } finally {
            server.process.destroyForcibly();
        }
    }

    /** A peer that dies without closing anything (SIGKILL): the channel still learns it and closes. */
    @Test
    void killedPeerClosesTheChannel() throws Exception {
        ServerProcess server = ServerProcess.start();
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            CompletableFuture<Void> echoed = new CompletableFuture<>();
            Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            ((ByteBuf) msg).release();
                            echoed.complete(null);
                        }
                    }).connect(TestAddress.get(), server.port).sync().channel();
            client.writeAndFlush(client.alloc().directBuffer(1024).writeZero(1024));
            echoed.get(60, TimeUnit.SECONDS);

            server.process.destroyForcibly();
            assertThat(server.process.waitFor(60, TimeUnit.SECONDS)).as("server process killed").isTrue();
            assertThat(client.closeFuture().await(60, TimeUnit.SECONDS))
                    .as("the channel closes after its peer was killed").isTrue();
            assertThat(client.isActive()).isFalse();
        } finally {
            server.process.destroyForcibly();
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    /** {@link EchoServerProcess} in a new JVM on this JVM's RDMA libraries and test address, once it listens. */
    private record ServerProcess(Process process, int port, BlockingQueue<String> lines, Thread reader) {
        static ServerProcess start() throws Exception {
            List<String> command = new ArrayList<>();
            command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
            command.add("--enable-native-access=ALL-UNNAMED");
            command.add("-Dio.netty.contrib.rdma.libraryPath="
                    + System.getProperty("io.netty.contrib.rdma.libraryPath", "bundled"));
            command.add("-D" + TestAddress.PROPERTY + "=" + TestAddress.host());
            command.add("-cp");
            command.add(System.getProperty("java.class.path"));
            command.add(EchoServerProcess.class.getName());
            Process process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            try {
                // Drain the server's output all the time (its log lines too), or it could block on a full pipe.
                BlockingQueue<String> lines = new LinkedBlockingQueue<>();
                Thread reader = new Thread(() -> new BufferedReader(new InputStreamReader(process.getInputStream(),
                        StandardCharsets.UTF_8)).lines().forEach(lines::add), "server-output");
                reader.setDaemon(true);
                reader.start();
                String line;
                do {
                    line = lines.poll(60, TimeUnit.SECONDS);
                } while (line != null && !line.startsWith("PORT "));
                assertThat(line).as("the server's PORT line").isNotNull();
                return new ServerProcess(process, Integer.parseInt(line.substring(5).trim()), lines, reader);
            } catch (Throwable t) {
                process.destroyForcibly();
                throw t;
            }
        }
    }

    private static void echo(int port) throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            Random random = new Random(7);
            int[] sizes = {1, 64, 8000, 8184, 8185, 65536, 1 << 20, 5 << 20};
            CRC32 sent = new CRC32();
            long total = 0;
            List<byte[]> messages = new ArrayList<>();
            for (int size : sizes) {
                byte[] m = new byte[size];
                random.nextBytes(m);
                sent.update(m);
                total += size;
                messages.add(m);
            }
            long expected = total;
            CompletableFuture<Long> echoed = new CompletableFuture<>();
            Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        private final CRC32 crc = new CRC32();
                        private long received;

                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            ByteBuf buf = (ByteBuf) msg;
                            received += buf.readableBytes();
                            crc.update(buf.nioBuffer());
                            buf.release();
                            if (received >= expected) {
                                echoed.complete(crc.getValue());
                            }
                        }

                        @Override
                        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                            echoed.completeExceptionally(cause);
                        }
                    }).connect(TestAddress.get(), port).sync().channel();
            for (byte[] m : messages) {
                client.write(client.alloc().directBuffer(m.length).writeBytes(m));
            }
            client.flush();
            assertThat(echoed.get(60, TimeUnit.SECONDS)).isEqualTo(sent.getValue());
            client.close().sync();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }
}

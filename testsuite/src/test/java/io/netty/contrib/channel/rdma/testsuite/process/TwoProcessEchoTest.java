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

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Server in one JVM, client in another (this one), on the software RDMA device across processes (its TCP wire) or
 * on the device the library path chose: messages across the SEND / ring-write boundary echoed and checked by CRC,
 * then a clean shutdown on both sides; and a server killed outright, which the client's channel must notice.
 */
@Timeout(300)
class TwoProcessEchoTest {
    @Test
    void echoAcrossTwoJvms() throws Exception {
        try (ChildJvm server = ChildJvm.start(List.of(), EchoServerProcess.class)) {
            String line = server.awaitLine("PORT ", 150);
            assertThat(line).as(() -> "the server's PORT line; " + server.diagnose()).isNotNull();
            int port = Integer.parseInt(line.substring(5).trim());

            EchoClientProcess.echo(TestAddress.host(), port);

            server.closeInput();
            assertThat(server.awaitExit(60)).as("server exit code").isZero();
            assertThat(server.output()).as("the server's output after shutdown").contains("STOPPED");
        }
    }

    /** A peer that dies without closing anything (SIGKILL): the channel still learns it and closes. */
    @Test
    void killedPeerClosesTheChannel() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try (ChildJvm server = ChildJvm.start(List.of(), EchoServerProcess.class)) {
            String line = server.awaitLine("PORT ", 150);
            assertThat(line).as(() -> "the server's PORT line; " + server.diagnose()).isNotNull();
            int port = Integer.parseInt(line.substring(5).trim());
            CompletableFuture<Void> echoed = new CompletableFuture<>();
            Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            ((ByteBuf) msg).release();
                            echoed.complete(null);
                        }
                    }).connect(TestAddress.get(), port).sync().channel();
            client.writeAndFlush(client.alloc().directBuffer(1024).writeZero(1024));
            echoed.get(60, TimeUnit.SECONDS);

            server.close(); // SIGKILL
            assertThat(server.awaitExit(60)).as("server process killed").isNotNull();
            assertThat(client.closeFuture().await(60, TimeUnit.SECONDS))
                    .as("the channel closes after its peer was killed").isTrue();
            assertThat(client.isActive()).isFalse();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }
}

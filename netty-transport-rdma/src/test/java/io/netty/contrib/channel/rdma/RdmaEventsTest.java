package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The JFR events of a connection's life: a client connects (Connect, Accept), writes 1000 bytes and closes (Close
 * on both ends, with the bytes), and a second connection over the per-address limit is refused (Reject).
 */
@Timeout(60)
class RdmaEventsTest {
    @BeforeAll
    static void setUp() {
        SoftwareRdma.use();
    }

    @Test
    void connectAcceptCloseAndRejectAreRecorded(@TempDir Path dir) throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        Path file = dir.resolve("rdma.jfr");
        try (Recording recording = new Recording()) {
            for (String name : List.of("Connect", "Accept", "Reject", "Close", "ProtocolError")) {
                recording.enable("io.netty.contrib.rdma." + name);
            }
            recording.start();
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .option(RdmaChannelOption.MAX_CONNECTIONS_PER_ADDRESS, 1)
                    .childHandler(new Idle())
                    .bind(TestAddress.get(), 0).sync().channel();
            Bootstrap b = new Bootstrap().group(group).channel(RdmaChannel.class).handler(new Idle());
            Channel client = b.connect(server.localAddress()).sync().channel();
            ChannelFuture second = b.connect(server.localAddress()).await();
            assertThat(second.isSuccess()).as("over MAX_CONNECTIONS_PER_ADDRESS").isFalse();
            assertThat(second.cause()).hasMessageContaining("rejected");
            client.writeAndFlush(Unpooled.directBuffer().writeZero(1000)).sync();
            Thread.sleep(200);
            client.close().sync();
            Thread.sleep(200);
            server.close().sync();
            recording.stop();
            recording.dump(file);
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        List<RecordedEvent> events = RecordingFile.readAllEvents(file);
        assertThat(count(events, "Connect")).isEqualTo(1);
        assertThat(count(events, "Accept")).isEqualTo(1);
        assertThat(count(events, "Reject")).isEqualTo(1);
        assertThat(events.stream().filter(e -> name(e).equals("Reject")).findFirst().orElseThrow()
                .getString("reason")).contains("MAX_CONNECTIONS_PER_ADDRESS");
        List<RecordedEvent> closes = events.stream().filter(e -> name(e).equals("Close")).toList();
        assertThat(closes).hasSize(2);
        assertThat(closes).anySatisfy(e -> {
            assertThat(e.getBoolean("byPeer")).isFalse();
            assertThat(e.getLong("bytesWritten")).isEqualTo(1000);
        });
        assertThat(closes).anySatisfy(e -> {
            assertThat(e.getBoolean("byPeer")).isTrue();
            assertThat(e.getLong("bytesRead")).isEqualTo(1000);
        });
        assertThat(count(events, "ProtocolError")).isZero();
        assertThat(events).filteredOn(e -> name(e).equals("Connect") || name(e).equals("Accept"))
                .allSatisfy(e -> assertThat(e.getString("transport")).isEqualTo("RDMA"));
        assertThat(events).allSatisfy(e -> {
            assertThat(e.getEventType().getCategoryNames()).containsExactly("Netty", "RDMA");
            assertThat(e.getString("remoteAddress")).isNotEqualTo("null").contains(":");
            assertThat(e.getString("localAddress")).isNotEqualTo("null").contains(":");
        });
    }

    @Test
    void tcpPathsAreRecordedWithTheirTransportAndReason(@TempDir Path dir) throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        EventLoopGroup nio = new MultiThreadIoEventLoopGroup(1, io.netty.channel.nio.NioIoHandler.newFactory());
        Path file = dir.resolve("tcp.jfr");
        TcpFallback.forgetAll();
        try (Recording recording = new Recording()) {
            recording.enable("io.netty.contrib.rdma.Connect");
            recording.enable("io.netty.contrib.rdma.Accept");
            recording.start();
            Channel plain = new ServerBootstrap().group(nio)
                    .channel(io.netty.channel.socket.nio.NioServerSocketChannel.class).childHandler(new Idle())
                    .bind(TestAddress.get(), 0).sync().channel();
            Channel fellBack = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .option(RdmaChannelOption.TCP_FALLBACK, true).handler(new Idle())
                    .connect(plain.localAddress()).sync().channel();
            fellBack.close().sync();
            plain.close().sync();
            Channel dual = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .option(RdmaChannelOption.TCP_LISTEN, true).childHandler(new Idle())
                    .bind(TestAddress.get(), 0).sync().channel();
            Channel tcpClient = new Bootstrap().group(nio).channel(io.netty.channel.socket.nio.NioSocketChannel.class)
                    .handler(new Idle()).connect(dual.localAddress()).sync().channel();
            Thread.sleep(200);
            tcpClient.close().sync();
            dual.close().sync();
            recording.stop();
            recording.dump(file);
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
            nio.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        List<RecordedEvent> events = RecordingFile.readAllEvents(file);
        RecordedEvent connect = events.stream().filter(e -> name(e).equals("Connect")).findFirst().orElseThrow();
        assertThat(connect.getString("transport")).isEqualTo("TCP");
        assertThat(connect.getString("fallbackReason")).isNotBlank();
        RecordedEvent accept = events.stream().filter(e -> name(e).equals("Accept")).findFirst().orElseThrow();
        assertThat(accept.getString("transport")).isEqualTo("TCP");
        assertThat(accept.getString("remoteAddress")).contains(":");
    }

    @Sharable
    private static final class Idle extends ChannelInboundHandlerAdapter {
    }

    private static long count(List<RecordedEvent> events, String name) {
        return events.stream().filter(e -> name(e).equals(name)).count();
    }

    private static String name(RecordedEvent e) {
        return e.getEventType().getName().substring("io.netty.contrib.rdma.".length());
    }
}

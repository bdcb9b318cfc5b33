package io.netty.contrib.channel.rdma.examples.rpc;

import io.grpc.ManagedChannel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The gRPC sample's server and client over the software RDMA device (selected by this module's surefire
 * configuration): unary, server-streaming and bidirectional calls, every response checked. Small messages
 * travel as SENDs; gRPC cuts larger ones into HTTP/2 DATA frames of up to 16 KiB, above the transport's SEND
 * size (8 KiB), which travel as ring writes.
 */
@Timeout(120)
class RpcSampleTest {
    /** From one byte to messages of many frames (several ring writes). */
    private static final int[] SIZES = {1, 100, 4000, 8000, 20_000, 70_000, 300_000};

    private static RpcServer server;
    private static EventLoopGroup group;
    private static ManagedChannel channel;

    @BeforeAll
    static void start() throws Exception {
        server = RpcServer.start("127.0.0.1", 0);
        group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        channel = RpcClient.newChannel("127.0.0.1", server.port(), group);
    }

    @AfterAll
    static void stop() throws Exception {
        if (channel != null) {
            channel.shutdown();
            assertThat(channel.awaitTermination(10, TimeUnit.SECONDS)).as("channel terminated").isTrue();
        }
        if (group != null) {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
        if (server != null) {
            server.stop();
        }
    }

    @Test
    void unary() {
        long[] rtts = RpcClient.unary(channel, 1000, SIZES);
        assertThat(rtts).hasSize(1000);
    }

    /**
     * gRPC holds every frame of a message until the whole message has arrived: messages several times the size
     * of the receive ring (4 MiB) must not stall the connection.
     */
    @Test
    void unaryMessagesLargerThanTheReceiveRing() {
        RpcClient.unary(channel, 2, new int[] {12 << 20});
    }

    @Test
    void serverStreaming() {
        RpcClient.repeat(channel, 1000, 1000);
        RpcClient.repeat(channel, 200, 100_000);
    }

    @Test
    void bidiStreaming() throws Exception {
        RpcClient.chat(channel, 1400, SIZES);
    }
}

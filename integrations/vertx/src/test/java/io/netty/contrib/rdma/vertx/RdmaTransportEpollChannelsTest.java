package io.netty.contrib.rdma.vertx;

import io.netty.channel.Channel;
import io.netty.channel.epoll.EpollDatagramChannel;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.datagram.DatagramSocket;
import io.vertx.core.internal.net.NetSocketInternal;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetSocket;
import io.vertx.core.net.SocketAddress;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What Vert.x on {@link RdmaTransport} runs as Netty's epoll channels on the RDMA loops: domain sockets
 * ({@code NetServer} / {@code NetClient} on a path) and datagram sockets; Vert.x's DNS resolver, which uses the
 * same datagram channels, is {@link RdmaTransportTest}'s.
 */
@Timeout(120)
class RdmaTransportEpollChannelsTest {
    private Vertx vertx;

    @BeforeEach
    void startVertx() {
        vertx = Vertx.builder().with(new VertxOptions().setEventLoopPoolSize(2))
                .withTransport(RdmaTransport.transport()).build();
    }

    @AfterEach
    void closeVertx() throws Exception {
        await(vertx.close());
    }

    /** Whether {@code ch} is registered on an RDMA loop (metric throws for any other loop). */
    private static boolean onRdmaLoop(Channel ch) {
        return RdmaIoHandler.metric(ch.eventLoop()) != null;
    }

    @Test
    void netSocketEchoOverADomainSocket(@TempDir Path dir) throws Exception {
        SocketAddress path = SocketAddress.domainSocketAddress(dir.resolve("echo.sock").toString());
        Promise<Channel> serverChannel = Promise.promise();
        NetServer server = await(vertx.createNetServer()
                .connectHandler(so -> {
                    serverChannel.tryComplete(((NetSocketInternal) so).channelHandlerContext().channel());
                    so.handler(so::write);
                })
                .listen(path));
        byte[] data = new byte[1 << 20];
        new Random(3).nextBytes(data);
        NetSocket socket = await(vertx.createNetClient().connect(path));
        Channel client = ((NetSocketInternal) socket).channelHandlerContext().channel();
        Promise<Buffer> done = Promise.promise();
        Buffer received = Buffer.buffer(data.length);
        socket.handler(buf -> {
            received.appendBuffer(buf);
            if (received.length() >= data.length) {
                done.tryComplete(received);
            }
        });
        for (int off = 0; off < data.length; off += 64 << 10) {
            socket.write(Buffer.buffer(Arrays.copyOfRange(data, off, off + (64 << 10))));
        }
        assertThat(await(done.future()).getBytes()).isEqualTo(data);
        assertThat(client).isInstanceOf(EpollDomainSocketChannel.class);
        assertThat(await(serverChannel.future())).isInstanceOf(EpollDomainSocketChannel.class);
        assertThat(onRdmaLoop(client)).isTrue();
        assertThat(onRdmaLoop(await(serverChannel.future()))).isTrue();
        await(socket.close());
        await(server.close());
    }

    @Test
    void datagramSocketsExchangePackets() throws Exception {
        DatagramSocket receiver = await(vertx.createDatagramSocket().listen(0, "127.0.0.1"));
        DatagramSocket sender = await(vertx.createDatagramSocket().listen(0, "127.0.0.1"));
        Promise<String> got = Promise.promise();
        receiver.handler(packet -> got.tryComplete(packet.data().toString() + " from " + packet.sender().port()));
        await(sender.send("hello over RDMA loops", receiver.localAddress().port(), "127.0.0.1"));
        assertThat(await(got.future())).isEqualTo("hello over RDMA loops from " + sender.localAddress().port());
        Channel ch = channelOf(receiver);
        assertThat(ch).isInstanceOf(EpollDatagramChannel.class);
        assertThat(onRdmaLoop(ch)).isTrue();
        await(sender.close());
        await(receiver.close());
    }

    /** Vert.x keeps a datagram socket's channel in a private field: read it (test only). */
    private static Channel channelOf(DatagramSocket socket) throws ReflectiveOperationException {
        java.lang.reflect.Field f = socket.getClass().getDeclaredField("channel");
        f.setAccessible(true);
        return (Channel) f.get(socket);
    }

    private static <T> T await(Future<T> future) throws Exception {
        return future.toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }
}

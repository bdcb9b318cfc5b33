package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.verbs.CmEvent;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventChannel;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventType;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.ConnParam;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Clients that never finish the handshake (they take the server's accept but never send the last message, so the
 * server never sees ESTABLISHED) are torn down after {@link RdmaChannelOption#ESTABLISH_TIMEOUT_MILLIS}, while
 * the attacker stays alive, and a legitimate client connects and echoes meanwhile.
 */
@Timeout(60)
class RdmaHandshakeTimeoutTest {
    static {
        SoftwareRdma.use();
    }

    private static final int HALF_OPEN = 20;
    /** A child handler for connections that are only counted. */
    private static final ChannelInitializer<SocketChannel> NOTHING = new ChannelInitializer<>() {
        @Override
        protected void initChannel(SocketChannel ch) {
            // nothing to do: connections only
        }
    };

    @Test
    void halfOpenHandshakesAreReleasedAndOthersStillConnect() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        List<CompletableFuture<Void>> halfOpenClosed = new ArrayList<>();
        try (CmEventChannel attacker = CmEventChannel.create()) {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childOption(RdmaChannelOption.ESTABLISH_TIMEOUT_MILLIS, 500)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object child) {
                            CompletableFuture<Void> closed = new CompletableFuture<>();
                            synchronized (halfOpenClosed) {
                                halfOpenClosed.add(closed);
                            }
                            ((Channel) child).closeFuture().addListener(f -> closed.complete(null));
                            ctx.fireChannelRead(child);
                        }
                    })
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    ctx.writeAndFlush(msg);
                                }
                            });
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            long qpsBefore = SoftwareRdma.hasObjectCounts() ? SoftwareRdma.objectCounts().get("qp") : 0;

            List<CmId> ids = new ArrayList<>();
            for (int i = 0; i < HALF_OPEN; i++) {
                ids.add(halfOpen(attacker, address));
            }
            // The server accepted them all: each holds a QP until the timeout.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (halfOpenClosed.size() < HALF_OPEN && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertThat(halfOpenClosed).hasSize(HALF_OPEN);

            // A legitimate client during the flood.
            CompletableFuture<Integer> echoed = new CompletableFuture<>();
            Channel good = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            echoed.complete(((ByteBuf) msg).readableBytes());
                            ((ByteBuf) msg).release();
                        }
                    }).connect(address).sync().channel();
            good.writeAndFlush(Unpooled.wrappedBuffer(new byte[100]));
            assertThat(echoed.get(20, TimeUnit.SECONDS)).isEqualTo(100);

            for (int i = 0; i < HALF_OPEN; i++) {
                halfOpenClosed.get(i).get(20, TimeUnit.SECONDS);
            }
            if (SoftwareRdma.hasObjectCounts()) {
                // Only the good connection's two QPs are left (its client and its server side).
                assertThat(SoftwareRdma.objectCounts().get("qp")).isEqualTo(qpsBefore + 2);
            }
            good.close().sync();
            for (CmId id : ids) {
                id.close();
            }
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void pendingHandshakesAndConnectionsPerAddressAreLimited() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        List<CmId> ids = new ArrayList<>();
        List<Channel> clients = new ArrayList<>();
        try (CmEventChannel attacker = CmEventChannel.create()) {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .option(RdmaChannelOption.MAX_PENDING_HANDSHAKES, 3)
                    .option(RdmaChannelOption.MAX_CONNECTIONS_PER_ADDRESS, 5)
                    .childOption(RdmaChannelOption.ESTABLISH_TIMEOUT_MILLIS, 1000)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            // nothing to do: connections only
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            for (int i = 0; i < 3; i++) {
                ids.add(halfOpen(attacker, address));
            }
            // A fourth handshake in progress is one too many.
            CmId refused = attacker.createId();
            ids.add(refused);
            assertThat(connectUntil(attacker, refused, address)).isEqualTo("REJECTED");
            for (CmId id : ids) {
                id.close();
            }
            ids.clear();
            // The abandoned handshakes are released (at the latest by the 1 s timeout): five connections fit the
            // limit per address, a sixth does not.
            Bootstrap bootstrap = new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            // nothing to do: connections only
                        }
                    });
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (clients.size() < 5 && System.nanoTime() < deadline) {
                try {
                    clients.add(bootstrap.connect(address).sync().channel());
                } catch (Exception e) {
                    Thread.sleep(50); // the abandoned handshakes still count until they are released
                }
            }
            assertThat(clients).hasSize(5);
            assertThatThrownBy(() -> bootstrap.connect(address).sync()).hasMessageContaining("no resources");
            clients.remove(0).close().sync();
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            Channel again = null;
            while (again == null && System.nanoTime() < deadline) {
                try {
                    again = bootstrap.connect(address).sync().channel();
                } catch (Exception e) {
                    Thread.sleep(50); // the server sees the close shortly after the client
                }
            }
            assertThat(again).as("a connection after one of the five closed").isNotNull();
            clients.add(again);
            for (Channel c : clients) {
                c.close().sync();
            }
            server.close().sync();
        } finally {
            for (CmId id : ids) {
                id.close();
            }
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /**
     * 300 half-open handshakes time out: the server logs the first and then how many more, one line each without a
     * stack trace (Netty's {@code ServerBootstrap} logged each with its {@code ConnectTimeoutException}: about 15
     * lines a handshake), and every QP and rdma_cm id of theirs is released.
     */
    @Test
    void timedOutHandshakesAreOneLineAndACount() throws Exception {
        int flood = 300;
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        AtomicInteger closed = new AtomicInteger();
        try (CapturedLog log = new CapturedLog(); CmEventChannel attacker = CmEventChannel.create()) {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childOption(RdmaChannelOption.ESTABLISH_TIMEOUT_MILLIS, 200)
                    .handler(closeCounter(closed))
                    .childHandler(NOTHING)
                    .bind(TestAddress.get(), 0).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            long qps = SoftwareRdma.hasObjectCounts() ? SoftwareRdma.objectCounts().get("qp") : 0;
            long cmIds = SoftwareRdma.hasObjectCounts() ? SoftwareRdma.objectCounts().get("cm_id") : 0;
            List<CmId> ids = new ArrayList<>();
            for (int i = 0; i < flood; i++) {
                ids.add(halfOpen(attacker, address));
            }
            await(() -> closed.get() == flood, "all " + flood + " half-open connections closed");
            // The count comes at the end of the interval that the first line began.
            Pattern count = Pattern.compile("handshakes not established in time: (\\d+) more");
            await(() -> reported(logged(log, server), "not established within 200 ms", count) == flood,
                    () -> "the server reported " + flood + " timeouts: " + logged(log, server));

            List<CapturedLog.Entry> logged = logged(log, server);
            assertThat(logged).as("what was logged").hasSizeLessThanOrEqualTo(3)
                    .allMatch(e -> e.message().startsWith(RdmaServerChannel.class.getName() + ": ") && e.thrown() == null);
            assertThat(logged.stream().mapToInt(CapturedLog.Entry::lines).sum())
                    .as("lines logged for %d timed-out handshakes: %s", flood, logged).isLessThanOrEqualTo(3);
            if (SoftwareRdma.hasObjectCounts()) {
                assertThat(SoftwareRdma.objectCounts().get("qp")).as("server QPs").isEqualTo(qps);
                for (CmId id : ids) {
                    id.close();
                }
                assertThat(SoftwareRdma.objectCounts().get("cm_id")).as("rdma_cm ids").isEqualTo(cmIds);
            } else {
                for (CmId id : ids) {
                    id.close();
                }
            }
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /**
     * Clients that leave while their connect requests wait for the server to read them: rdma_accept fails (EINVAL,
     * the request is gone), which is one line and a count, without a stack trace, and nothing of them is left.
     */
    @Test
    void clientsGoneBeforeTheirAcceptAreOneLineAndACount() throws Exception {
        int gone = 20;
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        AtomicInteger closed = new AtomicInteger();
        try (CapturedLog log = new CapturedLog(); CmEventChannel attacker = CmEventChannel.create()) {
            // Auto-read off: requests wait, taken by the server, until it reads them.
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .option(ChannelOption.AUTO_READ, false)
                    .handler(closeCounter(closed))
                    .childHandler(NOTHING)
                    .bind(TestAddress.get(), 0).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            long qps = SoftwareRdma.hasObjectCounts() ? SoftwareRdma.objectCounts().get("qp") : 0;
            long cmIds = SoftwareRdma.hasObjectCounts() ? SoftwareRdma.objectCounts().get("cm_id") : 0;
            List<CmId> ids = new ArrayList<>();
            for (int i = 0; i < gone; i++) {
                CmId id = attacker.createId();
                id.resolveAddr(null, address, 2000);
                expect(attacker, id, CmEventType.ADDR_RESOLVED);
                id.resolveRoute(2000);
                expect(attacker, id, CmEventType.ROUTE_RESOLVED);
                byte[] params = new byte[ConnectParameters.LENGTH];
                new ConnectParameters().wrap(MemorySegment.ofArray(params)).writeHeader().recvCredits(4)
                        .recvBufferSize(1024);
                id.connect(ConnParam.of(params).withQpNum(0x125));
                ids.add(id);
            }
            Thread.sleep(1000); // the requests reach the server
            for (CmId id : ids) {
                id.close();
            }
            Thread.sleep(1000); // and the server's rdma_cm sees the clients go
            server.read();
            await(() -> closed.get() == gone, "all " + gone + " accepted channels closed");
            Pattern count = Pattern.compile("accepts failed: (\\d+) more");
            await(() -> reported(logged(log, server), "could not accept it: ", count) == gone,
                    () -> "the server reported " + gone + " failed accepts: " + logged(log, server));

            List<CapturedLog.Entry> logged = logged(log, server);
            assertThat(logged).as("what was logged").hasSizeLessThanOrEqualTo(2)
                    .allMatch(e -> e.message().startsWith(RdmaServerChannel.class.getName() + ": ") && e.thrown() == null);
            assertThat(logged.get(0).message()).contains("rdma_accept failed: EINVAL");
            if (SoftwareRdma.hasObjectCounts()) {
                assertThat(SoftwareRdma.objectCounts().get("qp")).as("server QPs").isEqualTo(qps);
                assertThat(SoftwareRdma.objectCounts().get("cm_id")).as("rdma_cm ids").isEqualTo(cmIds);
            }
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /** A server handler that counts its children's closes. */
    private static ChannelInboundHandlerAdapter closeCounter(AtomicInteger closed) {
        return new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object child) {
                ((Channel) child).closeFuture().addListener(f -> closed.incrementAndGet());
                ctx.fireChannelRead(child);
            }
        };
    }

    /** What was logged, but the count lines that servers of earlier tests log late. */
    private static List<CapturedLog.Entry> logged(CapturedLog log, Channel server) {
        String others = RdmaServerChannel.class.getName() + ": ";
        String ours = others + server;
        // The leak detector's complaint about the test's RecordingLeakDetector comes once per JVM, from whichever
        // test loads the first buffer class: the test setup's, not a line of the transport's.
        String setup = "io.netty.util.ResourceLeakDetectorFactory: ";
        return log.entries().stream().filter(e -> !e.message().startsWith(setup))
                .filter(e -> !e.message().startsWith(others) || e.message().startsWith(ours)).toList();
    }

    /** The events logged: lines containing {@code each}, plus the counts {@code count} finds. */
    private static int reported(List<CapturedLog.Entry> logged, String each, Pattern count) {
        int n = 0;
        for (CapturedLog.Entry e : logged) {
            String m = e.message();
            Matcher c = count.matcher(m);
            if (c.find()) {
                n += Integer.parseInt(c.group(1));
            } else if (m.contains(each)) {
                n++;
            }
        }
        return n;
    }

    private static void await(BooleanSupplier condition, String what) throws InterruptedException {
        await(condition, () -> what);
    }

    private static void await(BooleanSupplier condition, Supplier<String> what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            assertThat(System.nanoTime()).as(what).isLessThan(deadline);
            Thread.sleep(20);
        }
    }

    /** Connects {@code id} without a QP; returns the name of the event that ends the attempt. */
    private static String connectUntil(CmEventChannel channel, CmId id, InetSocketAddress server) {
        id.resolveAddr(null, server, 2000);
        expect(channel, id, CmEventType.ADDR_RESOLVED);
        id.resolveRoute(2000);
        expect(channel, id, CmEventType.ROUTE_RESOLVED);
        byte[] params = new byte[ConnectParameters.LENGTH];
        new ConnectParameters().wrap(MemorySegment.ofArray(params)).writeHeader().recvCredits(4).recvBufferSize(1024);
        id.connect(ConnParam.of(params).withQpNum(0x124));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        CmEvent event;
        while ((event = channel.pollEvent()) == null) {
            assertThat(System.nanoTime()).as("an answer to the connect").isLessThan(deadline);
            Thread.onSpinWait();
        }
        String name = CmEventType.name(event.type());
        event.ack();
        return name;
    }

    /** An rdma_cm client without a QP: takes the server's accept (CONNECT_RESPONSE) and never establishes. */
    private static CmId halfOpen(CmEventChannel channel, InetSocketAddress server) {
        CmId id = channel.createId();
        id.resolveAddr(null, server, 2000);
        expect(channel, id, CmEventType.ADDR_RESOLVED);
        id.resolveRoute(2000);
        expect(channel, id, CmEventType.ROUTE_RESOLVED);
        byte[] params = new byte[ConnectParameters.LENGTH];
        new ConnectParameters().wrap(MemorySegment.ofArray(params)).writeHeader().recvCredits(4).recvBufferSize(1024);
        // No QP of its own: a made-up QP number, and the handshake stops at CONNECT_RESPONSE.
        id.connect(ConnParam.of(params).withQpNum(0x123));
        expect(channel, id, CmEventType.CONNECT_RESPONSE);
        return id;
    }

    /** The next event of {@code id}; those of the channel's other ids (the server dropping them) are skipped. */
    private static void expect(CmEventChannel channel, CmId id, int type) {
        // Never a blocking wait: a connection the server refuses must fail the test, not hang it.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        CmEvent event;
        while ((event = channel.pollEvent()) == null || event.id() != id) {
            if (event != null) {
                event.ack();
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("no rdma_cm event within 20 s (expected " + CmEventType.name(type) + ")");
            }
            Thread.onSpinWait();
        }
        int got = event.type();
        event.ack();
        assertThat(CmEventType.name(got)).isEqualTo(CmEventType.name(type));
    }
}

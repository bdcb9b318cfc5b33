package io.netty.contrib.rdma.micrometer;

import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaByteBufAllocator;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.Promise;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link RdmaMeterBinder} over the software RDMA device: after 100 echoes of 1000 B the loop, allocator and
 * channel meters say what the transport's own counters say, and a channel's meters go when it closes.
 */
@Timeout(120)
class RdmaMeterBinderTest {
    private static final int ECHOES = 100;
    private static final int SIZE = 1000;

    @Test
    void metersFollowTheTransportsCounters() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try {
            new RdmaMeterBinder(group, RdmaByteBufAllocator.defaultAllocator(), Tags.of("app", "test"))
                    .bindTo(registry);
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .childHandler(new Echo()).bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
            Promise<Void> done = group.next().newPromise();
            RdmaChannel client = (RdmaChannel) new Bootstrap().group(group).channel(RdmaChannel.class)
                    .handler(new PingPong(done)).connect(server.localAddress()).sync().channel();
            RdmaMeterBinder.bindChannel(registry, client, Tags.of("peer", "echo"));
            client.eventLoop().execute(() -> client.pipeline().get(PingPong.class).send(client));
            assertThat(done.await(60, TimeUnit.SECONDS)).isTrue();
            done.sync();

            assertThat(registry.get("rdma.channel.bytes.written").tags("peer", "echo").functionCounter().count())
                    .isEqualTo(ECHOES * SIZE);
            assertThat(registry.get("rdma.channel.bytes.read").functionCounter().count()).isEqualTo(ECHOES * SIZE);
            assertThat(registry.get("rdma.channel.sends").functionCounter().count())
                    .isEqualTo(client.metric().sends()).isGreaterThanOrEqualTo(ECHOES);
            FunctionTimer stalls = registry.get("rdma.channel.credit.stalls").functionTimer();
            assertThat(stalls.count()).isEqualTo(client.metric().creditStalls());

            double completions = 0;
            long expected = 0;
            int loops = 0;
            for (EventExecutor loop : group) {
                completions += registry.get("rdma.loop.completions").tags("app", "test", "loop",
                        Integer.toString(loops++)).functionCounter().count();
                expected += RdmaIoHandler.metric(loop).completions();
            }
            assertThat(loops).isEqualTo(2);
            // Both ends' sends and receives: at least one completion per message each way.
            assertThat(completions).isGreaterThanOrEqualTo(2 * ECHOES).isLessThanOrEqualTo(expected);
            assertThat(registry.get("rdma.loop.queue.pairs").gauges()).hasSize(2);
            // small echoes: no ring was asked for
            assertThat(registry.get("rdma.loop.ring.memory").gauges()).hasSize(2)
                    .allSatisfy(g -> assertThat(g.value()).isZero());
            assertThat(registry.get("rdma.allocator.memory.registered").gauge().value()).isPositive();
            assertThat(registry.get("rdma.loop.tcp.fallbacks").functionCounters()).hasSize(2)
                    .allSatisfy(c -> assertThat(c.count()).isZero());
            assertThat(registry.get("rdma.allocator.page.size").gauge().value())
                    .isEqualTo(RdmaByteBufAllocator.defaultAllocator().metric().pageSize()).isPositive();
            assertThat(registry.get("rdma.allocator.memory.huge").gauge().value())
                    .isEqualTo(RdmaByteBufAllocator.defaultAllocator().metric().hugePageMemory());
            // process-wide: once, not per loop; at least the pool's chunk is pinned
            assertThat(registry.get("rdma.memory.pinned").gauges()).hasSize(1);
            assertThat(registry.get("rdma.memory.pinned").gauge().value())
                    .isGreaterThanOrEqualTo(RdmaByteBufAllocator.defaultAllocator().metric().registeredMemory());
            long limit = RdmaIoHandler.metric(group.next()).pinnedMemoryLimit();
            double limitGauge = registry.get("rdma.memory.pinned.limit").gauge().value();
            if (limit < 0) {
                assertThat(limitGauge).isNaN();
            } else {
                assertThat(limitGauge).isEqualTo(limit);
            }

            // The device's packets: both ends are on it, so at least one per message each way, sent and received.
            assertThat(registry.get("rdma.port.counter").tag("counter", "hw_counters/sent_pkts").gauge().value())
                    .isGreaterThanOrEqualTo(2 * ECHOES);
            assertThat(registry.get("rdma.port.counter").tag("counter", "hw_counters/rcvd_pkts").gauge().value())
                    .isGreaterThanOrEqualTo(2 * ECHOES);
            assertThat(registry.get("rdma.port.counter").tag("counter", "hw_counters/retry_rnr_exceeded_err")
                    .gauge().value()).as("credits: never RNR").isZero();

            client.close().sync();
            assertThat(registry.find("rdma.channel.bytes.written").meters()).as("removed at close").isEmpty();
            assertThat(registry.find("rdma.loop.polls").meters()).hasSize(2);
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    @Sharable
    private static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }

    /** Sends SIZE bytes, waits for all of them to come back, ECHOES times. */
    private static final class PingPong extends ChannelInboundHandlerAdapter {
        private final Promise<Void> done;
        private int received;
        private int echoes;

        PingPong(Promise<Void> done) {
            this.done = done;
        }

        void send(Channel ch) {
            ByteBuf buf = ch.alloc().directBuffer(SIZE);
            for (int i = 0; i < SIZE; i++) {
                buf.writeByte(i);
            }
            ch.writeAndFlush(buf).addListener(f -> {
                if (!f.isSuccess()) {
                    done.tryFailure(f.cause());
                }
            });
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            received += buf.readableBytes();
            buf.release();
            if (received == SIZE) {
                received = 0;
                if (++echoes == ECHOES) {
                    done.trySuccess(null);
                } else {
                    send(ctx.channel());
                }
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.tryFailure(cause);
        }
    }
}

package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.protocol.MessageHeader;
import io.netty.contrib.channel.rdma.internal.verbs.CmEvent;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventChannel;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventType;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.CompletionQueue;
import io.netty.contrib.channel.rdma.internal.verbs.ConnParam;
import io.netty.contrib.channel.rdma.internal.verbs.IbvAccessFlags;
import io.netty.contrib.channel.rdma.internal.verbs.IbvSendFlags;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWcStatus;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWrOpcode;
import io.netty.contrib.channel.rdma.internal.verbs.MemoryRegion;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.QpInitAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;
import io.netty.contrib.channel.rdma.internal.verbs.RecvWorkRequests;
import io.netty.contrib.channel.rdma.internal.verbs.SendWorkRequests;
import io.netty.contrib.channel.rdma.internal.verbs.WorkCompletions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A peer that writes outside the receive ring it was given gets a remote access error, its connection is closed,
 * and the other connections of the same server, and their data, are untouched.
 */
@Timeout(60)
class RdmaHostilePeerTest {
    static {
        SoftwareRdma.use();
    }

    @Test
    void writeBeyondTheRingFailsAndTouchesNoOtherConnection() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        CompletableFuture<Void> hostileClosed = new CompletableFuture<>();
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                    .handler(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object child) {
                            // The well-behaved client stays connected until the end: the first to close is the
                            // attacker's. Watched from the server channel, which sees every accepted channel: one
                            // that fails before it is established never reaches the child handler.
                            ((Channel) child).closeFuture().addListener(f -> hostileClosed.complete(null));
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

                                @Override
                                public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                    ctx.close();
                                }
                            });
                        }
                    }).bind(TestAddress.get(), 0).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();

            // A well-behaved client with data in the server's ring before and after the attack.
            byte[] message = RdmaReceiveRingTest.random(100_000, 7);
            EchoCounter counter = new EchoCounter(2 * message.length);
            Channel good = new Bootstrap().group(group).channel(RdmaChannel.class).handler(counter)
                    .connect(address).sync().channel();
            good.writeAndFlush(Unpooled.wrappedBuffer(message)).sync();

            assertThat(IbvWcStatus.name(writeBeyondTheServersRing(address)))
                    .isIn("REM_ACCESS_ERR", "REM_OP_ERR", "REM_INV_REQ_ERR");
            hostileClosed.get(20, TimeUnit.SECONDS);

            good.writeAndFlush(Unpooled.wrappedBuffer(message)).sync();
            byte[] twice = new byte[2 * message.length];
            System.arraycopy(message, 0, twice, 0, message.length);
            System.arraycopy(message, 0, twice, message.length, message.length);
            assertThat(counter.done.get(20, TimeUnit.SECONDS)).isEqualTo(RdmaReceiveRingTest.crc(twice));
            assertThat(good.isActive()).isTrue();
            good.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }

    /** Connects with raw verbs and valid parameters, then RDMA-writes just past the end of the server's ring. */
    private static int writeBeyondTheServersRing(InetSocketAddress server) {
        try (CmEventChannel channel = CmEventChannel.create(); Arena arena = Arena.ofConfined()) {
            CmId id = channel.createId();
            ProtectionDomain pd = null;
            CompletionQueue cq = null;
            QueuePair qp = null;
            MemoryRegion mr = null;
            try (SendWorkRequests sends = new SendWorkRequests(1, 1); WorkCompletions wcs = new WorkCompletions(4)) {
                id.resolveAddr(null, server, 2000);
                expect(channel, CmEventType.ADDR_RESOLVED).ack();
                id.resolveRoute(2000);
                expect(channel, CmEventType.ROUTE_RESOLVED).ack();
                pd = id.verbs().allocPd();
                cq = id.verbs().createCq(16, null, 0);
                qp = id.createQp(pd, new QpInitAttributes(cq, cq, null, 4, 4, 2, 1, 0, false));
                MemorySegment memory = arena.allocate(8192, 4096);
                mr = pd.registerMemory(memory, IbvAccessFlags.LOCAL_WRITE);
                try (RecvWorkRequests recvs = new RecvWorkRequests(4, 1)) {
                    for (int i = 0; i < 4; i++) {
                        recvs.set(i, 100 + i, mr, 4096 + i * 1024L, 1024);
                    }
                    qp.postRecv(recvs, 0, 4);
                }
                byte[] params = new byte[ConnectParameters.LENGTH];
                new ConnectParameters().wrap(MemorySegment.ofArray(params)).writeHeader().recvCredits(4)
                        .recvBufferSize(1024);
                id.connect(ConnParam.of(params));
                CmEvent established = expect(channel, CmEventType.ESTABLISHED);
                established.ack();

                // Rings are offered on demand: say a large write is waiting, and take the RING the server sends.
                MessageHeader header = new MessageHeader().wrap(memory, 0)
                        .write(MessageHeader.TYPE_DATA, MessageHeader.FLAG_WANTS_RING, 0, 0);
                memory.set(java.lang.foreign.ValueLayout.JAVA_BYTE, MessageHeader.LENGTH, (byte) 1);
                sends.set(0, 1, IbvWrOpcode.SEND, IbvSendFlags.SIGNALED).sge(0, 0, mr, 0, MessageHeader.LENGTH + 1)
                        .numSge(0, 1);
                qp.postSend(sends, 0, 1);
                long ringAddress = 0;
                long ringSize = 0;
                int ringRkey = 0;
                long ringDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (ringSize == 0) {
                    if (System.nanoTime() > ringDeadline) {
                        throw new AssertionError("the server offered no ring");
                    }
                    if (cq.poll(wcs, 1) == 1 && wcs.wrId(0) >= 100) {
                        assertThat(wcs.status(0)).isEqualTo(IbvWcStatus.SUCCESS);
                        header.wrap(memory, 4096 + (wcs.wrId(0) - 100) * 1024);
                        if (header.type() == MessageHeader.TYPE_RING) {
                            ringAddress = header.ringAddress();
                            ringSize = header.ringSize();
                            ringRkey = header.ringRkey();
                        }
                    }
                }

                MemorySegment payload = memory.asSlice(0, 4096);
                payload.fill((byte) 0x5A);
                sends.set(0, 2, IbvWrOpcode.RDMA_WRITE, IbvSendFlags.SIGNALED)
                        .rdma(0, ringAddress + ringSize, ringRkey)
                        .sge(0, 0, mr, 0, 4096).numSge(0, 1);
                qp.postSend(sends, 0, 1);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (System.nanoTime() < deadline) {
                    if (cq.poll(wcs, 1) == 1 && wcs.wrId(0) == 2) {
                        return wcs.status(0);
                    }
                    Thread.onSpinWait();
                }
                throw new AssertionError("no completion for the write beyond the ring");
            } finally {
                if (qp != null) {
                    qp.close();
                }
                if (mr != null) {
                    mr.close();
                }
                if (cq != null) {
                    cq.close();
                }
                if (pd != null) {
                    pd.close();
                }
                id.close();
            }
        }
    }

    private static CmEvent expect(CmEventChannel channel, int type) {
        CmEvent event = channel.getEvent();
        if (event.type() != type) {
            String got = CmEventType.name(event.type());
            event.ack();
            throw new AssertionError("expected " + CmEventType.name(type) + ", got " + got);
        }
        return event;
    }

    /** Completes with the CRC of everything echoed once {@code expected} bytes came back. */
    private static final class EchoCounter extends ChannelInboundHandlerAdapter {
        final CompletableFuture<Long> done = new CompletableFuture<>();
        private final java.util.zip.CRC32 crc = new java.util.zip.CRC32();
        private final int expected;
        private int received;

        EchoCounter(int expected) {
            this.expected = expected;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            received += buf.readableBytes();
            crc.update(buf.nioBuffer());
            buf.release();
            if (received == expected) {
                done.complete(crc.getValue());
            }
        }
    }
}

package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.FixedRecvByteBufAllocator;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Received bytes are the application's own: a ring write is handed over as a buffer over the ring only once the
 * window of its slab is invalidated (zero copy, the default), or copied into a buffer of the channel's configured
 * allocator ({@link RdmaChannelOption#RECEIVE_ZERO_COPY} off); either way what the peer writes afterwards, with any
 * rkey it was given, cannot change them.
 */
@Timeout(60)
class RdmaReceiveCopyTest {
    private static EventLoopGroup group;

    @BeforeAll
    static void setUp() {
        SoftwareRdma.use();
        group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());
    }

    @AfterAll
    static void tearDown() throws Exception {
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
    }

    @Test
    void copiedBytesNeverChangeWhateverThePeerWritesAfterwards() throws Exception {
        Received r = receiveThenOverwrite(false);
        try {
            assertThat(r.overwrite).as("the peer's write into the slab it left").isEqualTo("REM_ACCESS_ERR");
            assertThat(allBytes(r.held, (byte) 0x11)).as("the bytes the application holds").isTrue();
            assertThat(r.zeroCopyBuffers).isZero();
        } finally {
            r.held.release();
        }
    }

    @Test
    void zeroCopyBytesAreOutsideEveryWindowOfThePeer() throws Exception {
        Received r = receiveThenOverwrite(true);
        try {
            assertThat(r.zeroCopyBuffers).as("handed over as a buffer over the ring").isEqualTo(1);
            assertThat(r.overwrite).as("the peer's write over bytes the application holds")
                    .isEqualTo("REM_ACCESS_ERR");
            assertThat(allBytes(r.held, (byte) 0x11)).as("the held buffer over the ring").isTrue();
        } finally {
            r.held.release();
        }
    }

    /** What {@link #receiveThenOverwrite} saw. */
    private record Received(ByteBuf held, String overwrite, long zeroCopyBuffers) {
    }

    /**
     * A raw-verbs peer puts 4 KiB of 0x11 in the server's ring by a sealed WRITE WITH IMMEDIATE; once the server's
     * handler holds the buffer it got, the peer RDMA-writes 0x22 over the same ring bytes with the slab's rkey.
     */
    private static Received receiveThenOverwrite(boolean zeroCopy) throws Exception {
        CompletableFuture<ByteBuf> got = new CompletableFuture<>();
        CompletableFuture<RdmaChannel> child = new CompletableFuture<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childOption(RdmaChannelOption.RECEIVE_ZERO_COPY, zeroCopy)
                .childOption(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(64 << 10))
                .childHandler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ByteBuf buf = (ByteBuf) msg;
                        if (buf.readableBytes() == 4096) {
                            child.complete((RdmaChannel) ctx.channel());
                            got.complete(buf);
                        } else {
                            buf.release(); // the one byte that asked for the ring
                        }
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        try (RawPeer peer = new RawPeer((InetSocketAddress) server.localAddress())) {
            peer.awaitRing();
            peer.payload().fill((byte) 0x11);
            assertThat(peer.ringWriteAtStart(4096)).isEqualTo("SUCCESS");
            ByteBuf held = got.get(20, TimeUnit.SECONDS);
            assertThat(allBytes(held, (byte) 0x11)).as("the bytes delivered").isTrue();
            long zeroCopyBuffers = child.get().metric().zeroCopyBuffers();
            peer.payload().fill((byte) 0x22);
            String overwrite = peer.write(peer.ringAddress, peer.ringRkeys[0], 4096, null);
            return new Received(held, overwrite, zeroCopyBuffers);
        } finally {
            server.close().sync();
        }
    }

    /**
     * Connection 1 of a peer writes into connection 2's ring with connection 2's rkey: the window bound to
     * connection 2's queue pair refuses it (a plain memory region's rkey would work on every queue pair of the
     * protection domain), and connection 2 then receives exactly its own bytes.
     */
    @Test
    void aRingIsWritableOnItsOwnConnectionOnly() throws Exception {
        CompletableFuture<ByteBuf> got = new CompletableFuture<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childOption(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(64 << 10))
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ByteBuf buf = (ByteBuf) msg;
                                if (buf.readableBytes() == 4096) {
                                    got.complete(buf);
                                } else {
                                    buf.release();
                                }
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        InetSocketAddress address = (InetSocketAddress) server.localAddress();
        try (RawPeer attacker = new RawPeer(address); RawPeer victim = new RawPeer(address)) {
            victim.awaitRing();
            attacker.payload().fill((byte) 0x66);
            assertThat(attacker.write(victim.ringAddress, victim.ringRkeys[0], 4096, null))
                    .isEqualTo("REM_ACCESS_ERR");
            victim.payload().fill((byte) 0x11);
            assertThat(victim.ringWriteAtStart(4096)).isEqualTo("SUCCESS");
            ByteBuf held = got.get(20, TimeUnit.SECONDS);
            try {
                assertThat(allBytes(held, (byte) 0x11)).as("the victim's bytes").isTrue();
            } finally {
                held.release();
            }
        } finally {
            server.close().sync();
        }
    }

    private static boolean allBytes(ByteBuf buf, byte value) {
        for (int i = buf.readerIndex(); i < buf.writerIndex(); i++) {
            if (buf.getByte(i) != value) {
                return false;
            }
        }
        return true;
    }

    @Test
    void theChannelsAllocatorTakesEveryMessageSmallOrLarge() throws Exception {
        ByteBufAllocator heap = new UnpooledByteBufAllocator(false);
        List<ByteBufAllocator> serverAllocators = new CopyOnWriteArrayList<>();
        List<ByteBufAllocator> clientAllocators = new CopyOnWriteArrayList<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childOption(ChannelOption.ALLOCATOR, heap)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                serverAllocators.add(((ByteBuf) msg).alloc());
                                ctx.write(msg);
                            }

                            @Override
                            public void channelReadComplete(ChannelHandlerContext ctx) {
                                ctx.flush();
                            }
                        });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        int[] sizes = {1, 100, 8000, 20_000, 1 << 20, 3 << 20};
        long total = 0;
        CRC32 sent = new CRC32();
        byte[][] messages = new byte[sizes.length][];
        Random random = new Random(5);
        for (int i = 0; i < sizes.length; i++) {
            messages[i] = new byte[sizes[i]];
            random.nextBytes(messages[i]);
            sent.update(messages[i]);
            total += sizes[i];
        }
        long expected = total;
        CompletableFuture<Long> echoed = new CompletableFuture<>();
        Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                .option(ChannelOption.ALLOCATOR, heap)
                .handler(new ChannelInboundHandlerAdapter() {
                    final CRC32 crc = new CRC32();
                    long bytes;

                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ByteBuf buf = (ByteBuf) msg;
                        clientAllocators.add(buf.alloc());
                        bytes += buf.readableBytes();
                        crc.update(buf.nioBuffer());
                        buf.release();
                        if (bytes == expected) {
                            echoed.complete(crc.getValue());
                        }
                    }
                }).connect(server.localAddress()).sync().channel();
        for (byte[] m : messages) {
            client.write(Unpooled.wrappedBuffer(m));
        }
        client.flush();
        assertThat(echoed.get(30, TimeUnit.SECONDS)).isEqualTo(sent.getValue());
        assertThat(serverAllocators).isNotEmpty().allMatch(a -> a == heap);
        assertThat(clientAllocators).isNotEmpty().allMatch(a -> a == heap);
        client.close().sync();
        server.close().sync();
    }
}

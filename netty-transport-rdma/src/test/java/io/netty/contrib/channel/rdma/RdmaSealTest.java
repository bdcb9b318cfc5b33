package io.netty.contrib.channel.rdma;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
import io.netty.contrib.channel.rdma.internal.protocol.MessageHeader;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The SEAL message (docs/PROTOCOL.md §3): a writer leaves a slab by a plain RDMA WRITE followed by a SEND_WITH_INV
 * that invalidates the slab's window as it arrives. A raw-verbs peer does it right, and wrong: a SEAL whose
 * invalidation names another window, a SEAL without one, a DATA message that invalidates a window. The server's
 * channel delivers the first at once, with no invalidation of its own, and closes the connection for the others.
 */
@Timeout(120)
class RdmaSealTest {
    static {
        SoftwareRdma.use();
    }

    private EventLoopGroup group;
    private Channel server;
    private final CompletableFuture<ByteBuf> read = new CompletableFuture<>();
    private final CompletableFuture<Throwable> failed = new CompletableFuture<>();
    private final CompletableFuture<Void> closed = new CompletableFuture<>();
    private final CompletableFuture<Void> active = new CompletableFuture<>();

    @BeforeEach
    void startServer() throws Exception {
        group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelActive(ChannelHandlerContext ctx) {
                        ctx.channel().closeFuture().addListener(f -> closed.complete(null));
                        active.complete(null);
                    }

                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        ByteBuf buf = (ByteBuf) msg;
                        if (buf.readableBytes() == 1) {
                            buf.release(); // the one-byte DATA that asked for the ring
                        } else if (!read.complete(buf)) {
                            buf.release();
                        }
                    }

                    @Override
                    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                        failed.complete(cause);
                        ctx.close();
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
    }

    @AfterEach
    void stopServer() throws Exception {
        read.thenAccept(ByteBuf::release);
        server.close().sync();
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
    }

    @Test
    void sealByRemoteInvalidationDeliversTheWriteAndLeavesItsSlabUnwritable() throws Exception {
        try (RawPeer peer = new RawPeer((InetSocketAddress) server.localAddress())) {
            awaitRing(peer);
            int length = 3000;
            MemorySegment payload = peer.payload();
            for (int i = 0; i < length; i++) {
                payload.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 7));
            }
            assertThat(peer.write(peer.ringAddress, peer.ringRkeys[0], length, null)).isEqualTo("SUCCESS");
            assertThat(peer.send(MessageHeader.TYPE_SEAL, Immediate.encode(length, 0, true, true),
                    peer.ringRkeys[0])).isEqualTo("SUCCESS");

            ByteBuf held = read.get(20, TimeUnit.SECONDS);
            assertThat(held.readableBytes()).isEqualTo(length);
            byte[] expected = new byte[length];
            for (int i = 0; i < length; i++) {
                expected[i] = (byte) (i * 7);
            }
            assertThat(copy(held)).isEqualTo(expected);

            // The slab's window went with the SEAL: a write there with the rkey the peer had fails at the device
            // and changes nothing the reader holds.
            payload.fill((byte) 0x55);
            assertThat(peer.write(peer.ringAddress, peer.ringRkeys[0], length, null))
                    .isIn("REM_ACCESS_ERR", "REM_OP_ERR");
            assertThat(copy(held)).isEqualTo(expected);
        }
    }

    @Test
    void sealInvalidatingAnotherSlabsWindowClosesTheConnection() throws Exception {
        try (RawPeer peer = new RawPeer((InetSocketAddress) server.localAddress())) {
            awaitRing(peer);
            assertThat(peer.ringRkeys.length).isGreaterThan(1);
            assertThat(peer.write(peer.ringAddress, peer.ringRkeys[0], 1000, null)).isEqualTo("SUCCESS");
            peer.send(MessageHeader.TYPE_SEAL, Immediate.encode(1000, 0, true, true), peer.ringRkeys[1]);
            assertClosedFor("invalidated rkey");
        }
    }

    @Test
    void sealWithoutInvalidationClosesTheConnection() throws Exception {
        try (RawPeer peer = new RawPeer((InetSocketAddress) server.localAddress())) {
            awaitRing(peer);
            assertThat(peer.write(peer.ringAddress, peer.ringRkeys[0], 1000, null)).isEqualTo("SUCCESS");
            peer.send(MessageHeader.TYPE_SEAL, Immediate.encode(1000, 0, true, true), null);
            assertClosedFor("without an invalidation");
        }
    }

    @Test
    void dataMessageThatInvalidatesAWindowClosesTheConnection() throws Exception {
        try (RawPeer peer = new RawPeer((InetSocketAddress) server.localAddress())) {
            awaitRing(peer);
            peer.send(MessageHeader.TYPE_CREDIT, 0, peer.ringRkeys[2]);
            assertClosedFor("only SEAL may invalidate");
        }
    }

    /**
     * The server's RING, and its channel active: a message that breaks a rule before the server saw the connection
     * established fails a channel the handler never sees.
     */
    private void awaitRing(RawPeer peer) throws Exception {
        peer.awaitRing();
        active.get(20, TimeUnit.SECONDS);
    }

    private void assertClosedFor(String reason) throws Exception {
        closed.get(20, TimeUnit.SECONDS);
        assertThat(failed.get(1, TimeUnit.SECONDS)).hasMessageContaining(reason);
        assertThat(read).isNotDone();
    }

    private static byte[] copy(ByteBuf buf) {
        byte[] bytes = new byte[buf.readableBytes()];
        buf.getBytes(buf.readerIndex(), bytes);
        return bytes;
    }
}

package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import io.netty.handler.codec.LengthFieldPrepender;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Frames of random sizes from 0 B to 16 MiB (SENDs, single ring writes, frames split over many ring writes and
 * larger than the ring) echoed through Netty's length-field codec: every frame comes back whole, in order, with
 * its CRC. The decoders cumulate, so buffers over the ring are held, grown and released by ordinary codec code.
 */
@Timeout(180)
class RdmaRandomEchoTest {
    static final int MAX_FRAME = 16 << 20;
    static EventLoopGroup group;

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
    void framesOfRandomSizesUpTo16MiBComeBackWholeAndInOrder() throws Exception {
        echoFrames(group, randomSizes(120, MAX_FRAME, 11), 11);
    }

    /** Sizes spread evenly over orders of magnitude (0 B, a few bytes, ... 16 MiB), the extremes included. */
    static int[] randomSizes(int count, int max, long seed) {
        Random random = new Random(seed);
        int[] sizes = new int[count];
        sizes[0] = 0;
        sizes[1] = max;
        for (int i = 2; i < count; i++) {
            sizes[i] = (int) Math.min(max, Math.pow(2, random.nextDouble() * (Math.log(max) / Math.log(2))) - 1);
        }
        return sizes;
    }

    /** Echoes one frame per size through a server on {@code group}, then closes both ends. */
    static void echoFrames(EventLoopGroup group, int[] sizes, long seed) throws Exception {
        List<Channel> serverChildren = new CopyOnWriteArrayList<>();
        CompletableFuture<Void> serverFailure = new CompletableFuture<>();
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        serverChildren.add(ch);
                        ch.pipeline().addLast(new LengthFieldBasedFrameDecoder(MAX_FRAME + 4, 0, 4, 0, 4),
                                new LengthFieldPrepender(4),
                                new ChannelInboundHandlerAdapter() {
                                    @Override
                                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                        ctx.write(msg);
                                    }

                                    @Override
                                    public void channelReadComplete(ChannelHandlerContext ctx) {
                                        ctx.flush();
                                    }

                                    @Override
                                    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                        serverFailure.completeExceptionally(cause);
                                        ctx.close();
                                    }
                                });
                    }
                }).bind(TestAddress.get(), 0).sync().channel();
        List<Long> sentCrcs = new ArrayList<>();
        List<Long> receivedCrcs = new ArrayList<>();
        List<Integer> receivedSizes = new ArrayList<>();
        CompletableFuture<Void> done = new CompletableFuture<>();
        Channel client = new Bootstrap().group(group).channel(RdmaChannel.class)
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new LengthFieldBasedFrameDecoder(MAX_FRAME + 4, 0, 4, 0, 4),
                                new LengthFieldPrepender(4),
                                new ChannelInboundHandlerAdapter() {
                                    @Override
                                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                        ByteBuf frame = (ByteBuf) msg;
                                        receivedSizes.add(frame.readableBytes());
                                        receivedCrcs.add(crc(frame));
                                        frame.release();
                                        if (receivedCrcs.size() == sizes.length) {
                                            done.complete(null);
                                        }
                                    }

                                    @Override
                                    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                        done.completeExceptionally(cause);
                                    }
                                });
                    }
                }).connect(server.localAddress()).sync().channel();
        Random random = new Random(seed);
        for (int size : sizes) {
            ByteBuf frame = client.alloc().directBuffer(size);
            byte[] chunk = new byte[Math.min(size, 64 << 10)];
            while (frame.writableBytes() > 0 && frame.writerIndex() < size) {
                random.nextBytes(chunk);
                frame.writeBytes(chunk, 0, Math.min(chunk.length, size - frame.writerIndex()));
            }
            sentCrcs.add(crc(frame));
            client.write(frame);
        }
        client.flush();
        try {
            CompletableFuture.anyOf(done, serverFailure).get(150, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            // Where each side's credits stand says which one waits for what.
            System.err.println("stalled: client " + ((RdmaChannel) client).connection + " outbound="
                    + client.unsafe().outboundBuffer().totalPendingWriteBytes() + " received=" + receivedCrcs.size());
            for (Channel c : serverChildren) {
                ChannelOutboundBuffer out = c.unsafe().outboundBuffer();
                System.err.println("stalled: server " + ((RdmaChannel) c).connection + " outbound="
                        + (out == null ? -1 : out.totalPendingWriteBytes()));
            }
            throw e;
        }
        assertThat(receivedSizes).containsExactlyElementsOf(toList(sizes));
        assertThat(receivedCrcs).containsExactlyElementsOf(sentCrcs);
        client.close().sync();
        server.close().sync();
    }

    private static List<Integer> toList(int[] values) {
        List<Integer> list = new ArrayList<>();
        for (int v : values) {
            list.add(v);
        }
        return list;
    }

    static long crc(ByteBuf buf) {
        CRC32 crc = new CRC32();
        for (ByteBuffer b : buf.nioBuffers()) {
            crc.update(b);
        }
        return crc.getValue();
    }
}

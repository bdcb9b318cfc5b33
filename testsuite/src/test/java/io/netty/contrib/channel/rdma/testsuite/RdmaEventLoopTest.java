package io.netty.contrib.channel.rdma.testsuite;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import io.netty.testsuite.transport.AbstractSingleThreadEventLoopTest;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;

import java.util.concurrent.Executor;

/** Netty's event-loop tests on loops driven by {@link RdmaIoHandler}, as the epoll and io_uring loops run them. */
class RdmaEventLoopTest extends AbstractSingleThreadEventLoopTest {
    private static final String NO_ITERATION = "Netty's SingleThreadIoEventLoop, the loop of every IoHandler"
            + " (epoll's and io_uring's too), neither counts nor iterates its channels: registeredChannels() is -1"
            + " and registeredChannelsIterator() throws UnsupportedOperationException. See testsuite/README.md.";

    @Test
    @Override
    @Disabled(NO_ITERATION)
    public void testChannelsIteratorEmpty() throws Exception {
        super.testChannelsIteratorEmpty();
    }

    @Test
    @Override
    @Disabled(NO_ITERATION)
    public void testChannelsIterator() throws Exception {
        super.testChannelsIterator();
    }

    @Test
    @Override
    @Disabled(NO_ITERATION)
    public void testChannelsIteratorRemoveThrows() throws Exception {
        super.testChannelsIteratorRemoveThrows();
    }

    @Override
    protected EventLoopGroup newEventLoopGroup() {
        return new MultiThreadIoEventLoopGroup(RdmaIoHandler.newFactory());
    }

    @Override
    protected EventLoopGroup newAutoScalingEventLoopGroup() {
        return new MultiThreadIoEventLoopGroup(SCALING_MAX_THREADS, (Executor) null, AUTO_SCALING_CHOOSER_FACTORY,
                RdmaIoHandler.newFactory());
    }

    @Override
    protected Channel newChannel() {
        return new RdmaChannel();
    }

    @Override
    protected Class<? extends ServerChannel> serverChannelClass() {
        return RdmaServerChannel.class;
    }
}

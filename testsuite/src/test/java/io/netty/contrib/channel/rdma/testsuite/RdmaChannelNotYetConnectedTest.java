package io.netty.contrib.channel.rdma.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketChannelNotYetConnectedTest;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

import java.util.List;

class RdmaChannelNotYetConnectedTest extends SocketChannelNotYetConnectedTest {
    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.client();
    }

    @Test
    @Override
    @Disabled("Connects the RDMA client to an NIO (TCP) server, which an RDMA queue pair cannot reach."
            + " See testsuite/README.md.")
    public void readMustBePendingUntilChannelIsActive(TestInfo info) throws Throwable {
        super.readMustBePendingUntilChannelIsActive(info);
    }
}

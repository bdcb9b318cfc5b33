package io.netty.contrib.channel.rdma.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketRstTest;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

import java.util.List;

class RdmaRstTest extends SocketRstTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.socket();
    }

    @Test
    @Override
    @Disabled("Asserts TCP's reset: with SO_LINGER=0 a close sends only a RST, which the peer reports as an"
            + " IOException ('connection reset'). An RDMA disconnect has no reset. See testsuite/README.md.")
    public void testSoLingerZeroCausesOnlyRstOnClose(TestInfo testInfo) throws Throwable {
        super.testSoLingerZeroCausesOnlyRstOnClose(testInfo);
    }
}

package io.netty.contrib.channel.rdma.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.WriteBeforeRegisteredTest;

import java.util.List;

class RdmaWriteBeforeRegisteredTest extends WriteBeforeRegisteredTest {
    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.client();
    }
}

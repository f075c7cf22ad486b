package rollout

import (
	"os"
	"testing"

	"github.com/instancemgr/instance-manager/test/harness"
)

// suite is the package's world: environment, admin client, cloud, manager.
var suite = &harness.Suite{Prefix: "e2e"}

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

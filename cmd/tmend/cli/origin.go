package cli

import (
	"os"
	"os/user"
	"strconv"

	"github.com/tmend/tmend/cmd/tmend/buildinfo"
	"github.com/tmend/tmend/store/model"
)

// origin is what the run and report rows this process writes record of it: the binary's
// version and the host (a pod's name in Kubernetes).
func origin() model.Origin {
	host, _ := os.Hostname() // "" when unknown: the column stays NULL
	return model.Origin{Version: buildinfo.Get().Version, Host: host}
}

// cliActor is who runs a command that starts a run: the OS user's login name, or the uid
// where the user database does not name it (a container running as an arbitrary uid).
func cliActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid:" + strconv.Itoa(os.Getuid())
}

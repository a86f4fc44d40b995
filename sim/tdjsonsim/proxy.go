package tdjsonsim

import (
	"stashd/sim/tgsim"
	"stashd/tg"
)

// addProxy answers addProxy(server, port, enable, type) with the proxy
// object. TDLib takes it in any state after its parameters: before the
// session is ready the proxy is kept and added when it becomes ready.
func (s *session) addProxy(r *request) (object, error) {
	var p struct {
		Server string `json:"server"`
		Port   tdInt  `json:"port"`
		Enable bool   `json:"enable"`
		Type   struct {
			Type     string `json:"@type"`
			Username string `json:"username"`
			Password string `json:"password"`
			HTTPOnly bool   `json:"http_only"`
			Secret   string `json:"secret"`
		} `json:"type"`
	}
	if err := r.params(&p); err != nil {
		return nil, err
	}
	proxy := tg.Proxy{Server: p.Server, Port: int(p.Port), Username: p.Type.Username, Password: p.Type.Password, Secret: p.Type.Secret}
	typ := object{{"@type", p.Type.Type}}
	switch p.Type.Type {
	case "proxyTypeSocks5":
		proxy.Type = tg.ProxySOCKS5
		typ = append(typ, member{"username", p.Type.Username}, member{"password", p.Type.Password})
	case "proxyTypeHttp":
		proxy.Type = tg.ProxyHTTP
		typ = append(typ, member{"username", p.Type.Username}, member{"password", p.Type.Password}, member{"http_only", p.Type.HTTPOnly})
	case "proxyTypeMtproto":
		proxy.Type = tg.ProxyMTProto
		typ = append(typ, member{"secret", p.Type.Secret})
	default:
		return nil, tdError(400, "Proxy type must be non-empty")
	}
	if !p.Enable {
		return nil, notSimulated("addProxy without enable")
	}
	s.mu.Lock()
	cl := s.client
	if s.state == stateWaitTdlibParameters || s.state == stateClosing || s.state == stateClosed {
		s.mu.Unlock()
		return nil, tdError(400, "Call to addProxy unexpected")
	}
	if cl == nil {
		s.proxy = &proxy
	}
	s.mu.Unlock()
	if cl != nil {
		if err := cl.AddProxy(s.ctx, proxy); err != nil {
			return nil, err
		}
	}
	return object{{"@type", "proxy"}, {"id", 1}, {"server", p.Server}, {"port", int(p.Port)}, {"last_used_date", 0},
		{"is_enabled", true}, {"type", typ}}, nil
}

// addPendingProxy adds a proxy given before the session was ready, with
// s.mu held.
func (s *session) addPendingProxy(cl *tgsim.Client) {
	if s.proxy != nil {
		_ = cl.AddProxy(s.ctx, *s.proxy)
		s.proxy = nil
	}
}

"""Configs the kubelet must judge exactly as credprovider.tool.kubeconfig.model does (name -> file text)."""

from __future__ import annotations

P = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\n"
OK = "- name: a\n  matchImages: [x]\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  defaultCacheDuration: 1m\n"
CASES = {
    "valid": P + "providers:\n" + OK,
    "wrong kind": "apiVersion: kubelet.config.k8s.io/v1\nkind: Pod\nproviders: []\n",
    "wrong group": "apiVersion: example.com/v1\nkind: CredentialProviderConfig\nproviders: []\n",
    "kubelet configuration": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
    "no providers": P + "providers: []\n",
    "no apiVersion": "kind: CredentialProviderConfig\nproviders: []\n",
    "empty file": "",
    "bad duration": P
    + "providers:\n- name: a\n  matchImages: [x]\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  defaultCacheDuration: 5x\n",
    "missing duration": P
    + "providers:\n- name: a\n  matchImages: [x]\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n",
    "negative duration": P
    + "providers:\n- name: a\n  matchImages: [x]\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  defaultCacheDuration: -90s\n",
    "tokenAttributes in v1beta1": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: CredentialProviderConfig\nproviders:\n"
    + OK
    + "  tokenAttributes: {serviceAccountTokenAudience: a}\n",
    "token attributes all wrong": P
    + "providers:\n- name: a\n  matchImages: [x]\n  apiVersion: credentialprovider.kubelet.k8s.io/v1beta1\n  defaultCacheDuration: 1m\n  tokenAttributes: {serviceAccountTokenAudience: '', requiredServiceAccountAnnotationKeys: [A_b, k, k], optionalServiceAccountAnnotationKeys: [k, -bad], cacheType: Foo}\n",
    "names and images": P
    + "providers:\n- name: 'a b'\n  matchImages: ['x y', '%zz', 'a.io:port', ok.io]\n  apiVersion: ''\n  defaultCacheDuration: 1m\n- name: '.'\n  matchImages: [x]\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  defaultCacheDuration: 0s\n- name: '..'\n  matchImages: [x]\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  defaultCacheDuration: 0s\n- name: 'foo/bar'\n  matchImages: ['[::1']\n  apiVersion: credentialprovider.kubelet.k8s.io/v9\n  defaultCacheDuration: 0s\n",
    "duplicate names": P + "providers:\n" + OK + OK,
    "json duplicate field": '{"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig", "providers": [{"name":"a","name":"b"}]}',
    "yaml duplicate key": P + "providers:\n- name: a\n  name: b\n",
    "require false with keys": P
    + "providers:\n"
    + OK
    + "  tokenAttributes: {serviceAccountTokenAudience: aud, requireServiceAccount: false, requiredServiceAccountAnnotationKeys: [k], cacheType: Token}\n",
    "no cache type": P
    + "providers:\n"
    + OK
    + "  tokenAttributes: {serviceAccountTokenAudience: aud}\n",
    "qualified names": P
    + "providers:\n"
    + OK
    + "  tokenAttributes: {serviceAccountTokenAudience: a, requireServiceAccount: true, cacheType: Token, requiredServiceAccountAnnotationKeys: ['ex.com/A', 'Ex.com/a', 'x/y/z', '-x.com/a', '', '"
    + "a" * 64
    + "', '/x']}\n",
    "providers not a list": P + "providers: x\n",
    "matchImages not a list": P + "providers:\n- name: a\n  matchImages: x\n",
    "name a number": P + "providers:\n- name: 5\n",
    "env not a list": P + "providers:\n- name: a\n  env: x\n",
    "env name a number": P + "providers:\n- name: a\n  env: [{name: 5}]\n",
    "duration a number": P + "providers:\n- name: a\n  defaultCacheDuration: 5\n",
    "require a string": P
    + "providers:\n- name: a\n  tokenAttributes: {requireServiceAccount: 'true'}\n",
    "tokenAttributes a string": P + "providers:\n- name: a\n  tokenAttributes: x\n",
    "unknown env field": P + "providers:\n- name: a\n  env: [{name: A, value: b, x: 1}]\n",
    "matchImages number": P + "providers:\n- name: a\n  matchImages: [5]\n",
    "unknown fields": P + "extra: 1\nproviders:\n- name: a\n  unknownA: 1\n  unknownB: 2\n",
    "args string": P + "providers:\n" + OK + "  args: x\n",
    "valid sa": P
    + "providers:\n"
    + OK
    + "  tokenAttributes: {serviceAccountTokenAudience: aud, requireServiceAccount: true, requiredServiceAccountAnnotationKeys: [eks.amazonaws.com/role-arn], cacheType: ServiceAccount}\n",
    "null fields": P
    + "providers:\n- name: a\n  matchImages: [x]\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  defaultCacheDuration: 1m\n  args: null\n  env: null\n",
    # a file an editor saved with a byte-order mark, YAML and JSON
    "yaml with a byte-order mark": "\ufeff" + P + "providers:\n" + OK,
    "json with a byte-order mark": '\ufeff{"apiVersion": "kubelet.config.k8s.io/v1", "kind": '
    '"CredentialProviderConfig", "providers": [{"name": "a", "matchImages": ["x"], '
    '"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "defaultCacheDuration": "1m"}]}',
}
